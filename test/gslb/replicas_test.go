package gslb

// Replicas of one cluster (a Deployment behind a Service): two coredns
// processes on the same folder publish the same fleet view at the same
// serial (plugin/gslb README, "Replicas").

import (
	"fmt"
	"net"
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

// startReplicas starts two replicas of one cluster (eu) on the folder dir,
// 300 ms apart (their clocks differ), with localtargets as given.
func startReplicas(t *testing.T, dir, localtargets string) []*harness.CoreDNS {
	t.Helper()
	var replicas []*harness.CoreDNS
	for i := range 2 {
		if i > 0 {
			time.Sleep(300 * time.Millisecond)
		}
		ip := harness.NewIP(t)
		replicas = append(replicas, harness.StartCoreDNS(t, fmt.Sprintf(`%s:53 {
    bind %s
    %s
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
`, zone, ip, localtargets, zone, dir), harness.WithProbe("www."+zone, dns.TypeA)))
	}
	return replicas
}

// replicaSerials waits until both replicas publish a view at one serial
// other than not, and returns their serials then or at the deadline.
func replicaSerials(replicas []*harness.CoreDNS, not uint32) (a, b uint32) {
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
	replicas := startReplicas(t, dir, "localtargets")
	serials := func(not uint32) (uint32, uint32) { return replicaSerials(replicas, not) }
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

// TestReplicasAgreeOnHealthVerdicts: with health checks, each replica
// decides its own verdicts, a check interval apart; the store's serial does
// not move. A target whose service stops leaves both replicas' views at one
// serial, one step ahead; when it returns, one step more, the same in both.
func TestReplicasAgreeOnHealthVerdicts(t *testing.T) {
	harness.RequirePlugins(t, "k8scrd", "localtargets", "gslb")
	svc := &service{addr: harness.NewIP(t) + ":53"}
	svc.up(t)
	target, _, _ := net.SplitHostPort(svc.addr)
	dir := t.TempDir()
	testkit.WriteFile(t, dir, "hosts.yaml", testkit.DNSEndpoint("apps", "hosts", nil,
		testkit.Endpoint{DNSName: "www." + zone, RecordType: "A", TTL: 7, Targets: []string{target}}))
	replicas := startReplicas(t, dir, `localtargets {
        healthcheck tcp 53 {
            allow 127.0.0.0/8
            interval 200ms
            timeout 100ms
            fails 1
            passes 1
        }
    }`)
	holds := func(addr string) bool {
		return slices.Contains(viewAXFR(t, addr), "www.h._fleet."+zone+". 7 IN A "+target)
	}
	s0, s0b := replicaSerials(replicas, 0)
	if s0 != s0b || !holds(replicas[0].Addr) || !holds(replicas[1].Addr) {
		t.Fatalf("both checked healthy: serials %d and %d, views with the target: %v %v", s0, s0b, holds(replicas[0].Addr), holds(replicas[1].Addr))
	}
	svc.down()
	s1, s1b := replicaSerials(replicas, s0)
	if s1 != s1b || s1 != s0+1 || holds(replicas[0].Addr) || holds(replicas[1].Addr) {
		t.Fatalf("the service down: serials %d and %d, want both %d (one step); views with the target: %v %v", s1, s1b, s0+1, holds(replicas[0].Addr), holds(replicas[1].Addr))
	}
	svc.up(t)
	s2, s2b := replicaSerials(replicas, s1)
	if s2 != s2b || s2 != s0+2 || !holds(replicas[0].Addr) || !holds(replicas[1].Addr) {
		t.Fatalf("the service back: serials %d and %d, want both %d", s2, s2b, s0+2)
	}
	t.Logf("view serials %d, %d, %d in both replicas", s0, s1, s2)
}
