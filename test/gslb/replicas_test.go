package gslb

// Replicas of one cluster (a Deployment behind a Service): two coredns
// processes on the same folder publish the same fleet view at the same
// serial (plugin/gslb README, "Replicas").

import (
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/fleetdns/fleetdns/internal/testkit"
	"github.com/fleetdns/fleetdns/test/harness"

	"github.com/miekg/dns"
)

// viewSOA returns the serial of the fleet view a server publishes.
func viewSOA(addr string) (uint32, error) {
	m, err := harness.Ask(addr, "_fleet."+zone, dns.TypeSOA)
	if err != nil {
		return 0, err
	}
	for _, rr := range m.Answer {
		if soa, ok := rr.(*dns.SOA); ok {
			return soa.Serial, nil
		}
	}
	return 0, fmt.Errorf("_fleet.%s SOA: %s, no SOA", zone, dns.RcodeToString[m.Rcode])
}

// viewAXFR returns the records of the fleet view a server publishes, as
// text, sorted.
func viewAXFR(t *testing.T, addr string) []string {
	t.Helper()
	m := new(dns.Msg)
	m.SetAxfr("_fleet." + zone + ".")
	env, err := new(dns.Transfer).In(m, addr)
	if err != nil {
		t.Fatalf("AXFR of the view from %s: %v", addr, err)
	}
	var out []string
	for e := range env {
		if e.Error != nil {
			t.Fatalf("AXFR of the view from %s: %v", addr, e.Error)
		}
		out = append(out, harness.RRStrings(e.RR)...)
	}
	slices.Sort(out)
	return out
}

// TestReplicasPublishOneViewSerial: two replicas of one cluster, started
// apart on the same folder, publish the same serial for the same view (a
// peer reaching either transfers nothing); a change of the objects moves
// both forward (RFC 1982) to one serial again.
func TestReplicasPublishOneViewSerial(t *testing.T) {
	harness.RequirePlugins(t, "k8scrd", "localtargets", "gslb")
	dir := t.TempDir()
	write := func(targets ...string) {
		testkit.WriteFile(t, dir, "hosts.yaml", testkit.DNSEndpoint("apps", "hosts", nil,
			testkit.Endpoint{DNSName: "www." + zone, RecordType: "A", TTL: 7, Targets: targets}))
	}
	write("198.18.0.1")
	var replicas []*harness.CoreDNS
	for i := range 2 {
		if i > 0 {
			time.Sleep(300 * time.Millisecond) // started apart: their clocks differ
		}
		ip := harness.NewIP(t)
		replicas = append(replicas, harness.StartCoreDNS(t, fmt.Sprintf(`%s:53 {
    bind %s
    localtargets
    gslb %s {
        geotag eu
        fleet {
            notify_delay 10ms
        }
    }
    k8scrd {
        directory %s
    }
}
`, zone, ip, zone, dir), harness.WithProbe("www."+zone, dns.TypeA)))
	}
	// serials waits until both replicas publish a view and return their
	// serials, once they agree or after the deadline.
	serials := func(not uint32) (a, b uint32) {
		deadline := time.Now().Add(5 * time.Second)
		for {
			var errA, errB error
			a, errA = viewSOA(replicas[0].Addr)
			b, errB = viewSOA(replicas[1].Addr)
			if errA == nil && errB == nil && a == b && a != not || time.Now().After(deadline) {
				return a, b
			}
			time.Sleep(20 * time.Millisecond)
		}
	}
	s0a, s0b := serials(0)
	if s0a != s0b || s0a == 0 {
		t.Fatalf("the same folder, the same view: serials %d and %d, want one serial", s0a, s0b)
	}
	for i := range 5 { // and it stays so
		a, _ := viewSOA(replicas[0].Addr)
		b, _ := viewSOA(replicas[1].Addr)
		if a != s0a || b != s0a {
			t.Fatalf("check %d: serials %d and %d, want %d", i, a, b, s0a)
		}
	}
	if a, b := viewAXFR(t, replicas[0].Addr), viewAXFR(t, replicas[1].Addr); !slices.Equal(a, b) {
		t.Fatalf("one serial, two views:\n%v\n%v", a, b)
	}

	time.Sleep(1100 * time.Millisecond) // the folder's serial is its newest file time, in seconds
	write("198.18.0.1", "198.18.0.2")
	s1a, s1b := serials(s0a)
	if s1a != s1b {
		t.Fatalf("after a change: serials %d and %d, want one serial", s1a, s1b)
	}
	if int32(s1a-s0a) <= 0 {
		t.Fatalf("after a change: serial %d, not ahead of %d (RFC 1982)", s1a, s0a)
	}
	a, b := viewAXFR(t, replicas[0].Addr), viewAXFR(t, replicas[1].Addr)
	if !slices.Equal(a, b) || !slices.ContainsFunc(a, func(s string) bool { return s == "www.h._fleet."+zone+". 7 IN A 198.18.0.2" }) {
		t.Fatalf("after a change, the views:\n%v\n%v\nwant both with 198.18.0.2", a, b)
	}
	t.Logf("view serials: %d, then %d after the change, in both replicas", s0a, s1a)
}
