package gslb

import (
	"fmt"
	"strings"
	"testing"

	"github.com/fleetdns/fleetdns/internal/testkit"
	"github.com/fleetdns/fleetdns/test/harness"

	"github.com/miekg/dns"
)

// TestCacheStanzaKeepsGeoAnswersPerRegion runs eu with the documented
// `cache { disable success ZONE; disable denial ZONE }` stanza in its GSLB
// block. CoreDNS's cache keys an answer by name and type, not by client
// subnet, so a cached geo answer would be handed to clients of every region;
// with the stanza each client gets its own region's answer, however the
// queries interleave, while the block may still cache other zones.
func TestCacheStanzaKeepsGeoAnswersPerRegion(t *testing.T) {
	f := newFleet(t)
	stanza := fmt.Sprintf("    cache 30 {\n        disable success %s\n        disable denial %s\n    }\n", zone, zone)
	// ap runs a plain cache, to show the hazard the stanza guards against.
	f.start(t, fleetOptions{blockExtra: map[string]string{"eu": stanza, "ap": "    cache 30\n"}})

	eu := f.clusters["eu"]
	for round := range 3 {
		for _, region := range []string{"eu", "us", "ap", "us", "eu"} {
			m, err := harness.Ask(eu.addr, hostGeo, dns.TypeA, harness.ECS(subnetIn(region)))
			if err != nil {
				t.Fatal(err)
			}
			if got := harness.Targets(m, dns.TypeA); !equal(got, f.union(region)) {
				t.Fatalf("round %d: client in %s got %v from the cached block, want %v", round, region, got, f.union(region))
			}
		}
	}
	// Negative answers are not cached either: a host declared later answers
	// at once.
	m := harness.Exchange(t, eu.addr, "late."+zone, dns.TypeA)
	if m.Rcode != dns.RcodeNameError {
		t.Fatalf("late.%s before it is declared: %s, want NXDOMAIN", zone, dns.RcodeToString[m.Rcode])
	}
	testkit.WriteFile(t, eu.dir, "late.yaml", testkit.DNSEndpoint("apps", "late", nil,
		testkit.Endpoint{DNSName: "late." + zone, RecordType: "A", TTL: 5, Targets: []string{"10.10.9.9"}, ProviderSpecific: [][2]string{{"gslb/strategy", "geoip"}}}))
	testkit.Eventually(t, 3*peerRefresh, "the late host answered", func() (bool, string) {
		got, err := ask(eu.addr, "late."+zone, dns.TypeA, harness.ECS(subnetIn("eu")))
		return err == nil && equal(got, []string{"10.10.9.9"}), fmt.Sprintf("late.%s = %v (%v) after it was declared", zone, got, err)
	})

	// The hazard: with a plain cache the first region's answer is handed to
	// the next client. Logged, not asserted: it is CoreDNS's cache behaviour.
	ap := f.clusters["ap"]
	first, _ := ask(ap.addr, hostGeo, dns.TypeA, harness.ECS(subnetIn("eu")))
	second, _ := ask(ap.addr, hostGeo, dns.TypeA, harness.ECS(subnetIn("us")))
	t.Logf("plain cache: client in eu got %v, then client in us got %v (us's own is %v)", first, second, f.union("us"))
}

// TestExplainOnlyForAllowedClients asks for the explain record of a host
// from a client inside the `explain` list and from one outside it.
func TestExplainOnlyForAllowedClients(t *testing.T) {
	f := newFleet(t)
	allowed, other := harness.NewIP(t), harness.NewIP(t)
	f.start(t, fleetOptions{gslbExtra: map[string]string{"eu": fmt.Sprintf("        explain %s/32\n", allowed)}})
	eu := f.clusters["eu"]
	name := "_gslb-explain." + hostFailover

	txt, rcode, err := askTXTFrom(allowed, eu.addr, name)
	if err != nil || rcode != dns.RcodeSuccess || len(txt) == 0 {
		t.Fatalf("explain from allowed %s: %s %q (%v), want a TXT record", allowed, dns.RcodeToString[rcode], txt, err)
	}
	t.Logf("explain: %q", txt)
	all := fmt.Sprint(txt)
	for _, want := range []string{"failover", "us", "ap", "up"} {
		if !strings.Contains(all, want) {
			t.Errorf("explain %q does not mention %q", all, want)
		}
	}

	txt, rcode, err = askTXTFrom(other, eu.addr, name)
	if err != nil {
		t.Fatal(err)
	}
	if len(txt) != 0 {
		t.Errorf("explain from %s outside the ACL answered %s %q, want no explain record", other, dns.RcodeToString[rcode], txt)
	}
	// Default ACL (loopback) on us: 127.0.0.0/8 clients may ask.
	if txt, _, err := askTXTFrom(other, f.clusters["us"].addr, name); err != nil || len(txt) == 0 {
		t.Errorf("explain from loopback %s at us (default ACL): %q (%v), want a TXT record", other, txt, err)
	}
}

func askTXTFrom(src, addr, name string) ([]string, int, error) {
	m := new(dns.Msg)
	m.SetQuestion(dns.Fqdn(name), dns.TypeTXT)
	r, err := exchangeFrom(src, addr, m)
	if err != nil {
		return nil, 0, err
	}
	var out []string
	for _, rr := range r.Answer {
		if txt, ok := rr.(*dns.TXT); ok {
			out = append(out, txt.Txt...)
		}
	}
	return out, r.Rcode, nil
}
