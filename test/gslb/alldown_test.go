package gslb

// An all-down CNAME is not answered beside other data (plugin/gslb README,
// "All-down"): a CNAME stands alone, RFC 1034 §3.6.2.

import (
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/fleetdns/fleetdns/internal/testkit"
	"github.com/fleetdns/fleetdns/test/harness"

	"github.com/miekg/dns"
)

// TestAllDownCNAMEBesideOtherDataFailsOpen serves two hosts declared with
// no target (no cluster has any: all-down) and an all-down CNAME; one also
// has a TXT. dig and a miekg client get the CNAME at the first only; the
// second answers as without all-down (NODATA, its TXT still served), logged
// once, until its TXT goes.
func TestAllDownCNAMEBesideOtherDataFailsOpen(t *testing.T) {
	harness.RequirePlugins(t, "k8scrd", "gslb")
	ip, dir := harness.NewIP(t), t.TempDir()
	const sorry = "sorry.example.net."
	plain, withTXT := "down."+zone, "down-txt."+zone
	write := func(txt bool) {
		eps := []testkit.Endpoint{
			{DNSName: plain, RecordType: "A", TTL: 7, Targets: []string{}, ProviderSpecific: [][2]string{{"gslb/all-down", sorry}}},
			{DNSName: withTXT, RecordType: "A", TTL: 7, Targets: []string{}, ProviderSpecific: [][2]string{{"gslb/all-down", sorry}}},
		}
		if txt {
			eps = append(eps, testkit.Endpoint{DNSName: withTXT, RecordType: "TXT", TTL: 7, Targets: []string{"v=spf1 -all"}})
		}
		testkit.WriteFile(t, dir, "hosts.yaml", testkit.DNSEndpoint("apps", "hosts", nil, eps...))
	}
	write(true)
	srv := harness.StartCoreDNS(t, fmt.Sprintf(`%s:53 {
    bind %s
    gslb %s {
        geotag eu
    }
    k8scrd {
        directory %s
    }
}
`, zone, ip, zone, dir), harness.WithProbe(plain, dns.TypeA))

	if got := harness.DigShort(t, srv.Addr, plain, "A"); !slices.Equal(got, []string{sorry}) {
		t.Fatalf("dig %s A: %v, want the all-down CNAME %s", plain, got, sorry)
	}
	for _, qtype := range []uint16{dns.TypeA, dns.TypeAAAA} {
		m := harness.Exchange(t, srv.Addr, withTXT, qtype)
		if m.Rcode != dns.RcodeSuccess || len(m.Answer) != 0 || len(m.Ns) != 1 {
			t.Errorf("%s %s beside its TXT: %s %v, want NODATA with the SOA, no CNAME", withTXT, dns.TypeToString[qtype], dns.RcodeToString[m.Rcode], m.Answer)
		}
	}
	if got := harness.DigShort(t, srv.Addr, withTXT, "A"); len(got) != 0 {
		t.Errorf("dig %s A: %v, want nothing (NODATA)", withTXT, got)
	}
	if got := harness.DigShort(t, srv.Addr, withTXT, "TXT"); !slices.Equal(got, []string{`"v=spf1 -all"`}) {
		t.Errorf("dig %s TXT: %v, want its TXT", withTXT, got)
	}
	line := "All-down CNAME " + sorry + " not answered at " + withTXT + "."
	if !srv.WaitLog(line, 2*time.Second) {
		t.Errorf("no log line %q", line)
	}
	if n := strings.Count(srv.Log(), line); n != 1 {
		t.Errorf("%d log lines %q, want one", n, line)
	}

	// The TXT goes: the CNAME stands alone, and is answered.
	write(false)
	testkit.Eventually(t, 5*time.Second, "the all-down CNAME without the TXT", func() bool {
		m, err := harness.Ask(srv.Addr, withTXT, dns.TypeA)
		return err == nil && slices.Equal(harness.Targets(m, dns.TypeCNAME), []string{sorry})
	})
}
