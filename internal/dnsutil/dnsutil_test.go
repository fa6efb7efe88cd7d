package dnsutil

import (
	"strings"
	"testing"

	"github.com/coredns/coredns/plugin"
	"github.com/miekg/dns"
)

// TestZoneOfMatchesPluginZones checks the query path's allocation-free zone
// match against CoreDNS's plugin.Zones.Matches on awkward names.
func TestZoneOfMatchesPluginZones(t *testing.T) {
	zoneSets := [][]string{
		{"example.org."},
		{"example.org.", "sub.example.org."},
		{"sub.example.org.", "example.org.", "org."},
		{"."},
		{".", "example.org."},
		{"xample.org."},
	}
	names := []string{
		".", "org.", "example.org.", "EXAMPLE.org.", "www.example.org.", "wwwexample.org.",
		"a.sub.example.org.", "sub.example.org.", "xsub.example.org.", "a\\.example.org.",
		"a\\\\.example.org.", "a\\\\\\.example.org.", "\\.example.org.", "a\\046example.org.",
		"example.org.x.", "example.com.", "e.xample.org.", "xample.org.", "a.b.c.d.e.f.example.org.",
	}
	for _, zones := range zoneSets {
		for _, name := range names {
			if got, want := ZoneOf(zones, name), plugin.Zones(zones).Matches(name); got != want {
				t.Errorf("ZoneOf(%v, %q) = %q, plugin.Zones.Matches = %q", zones, name, got, want)
			}
		}
	}
}

func TestZoneOfAllocatesNothing(t *testing.T) {
	zones := []string{"example.org.", "sub.example.org.", "gslb.example.com."}
	if n := testing.AllocsPerRun(100, func() { ZoneOf(zones, "www.SUB.example.org.") }); n != 0 {
		t.Errorf("ZoneOf allocates %v times per call", n)
	}
}

func TestTXTStringsSurviveTheWire(t *testing.T) {
	long := strings.Repeat("abcdefghij", 60)
	for _, text := range []string{"", "v=spf1 -all", `a\b`, `"quoted"`, long, strings.Repeat(`\`, 300)} {
		rr := &dns.TXT{Hdr: dns.RR_Header{Name: "x.example.org.", Rrtype: dns.TypeTXT, Class: dns.ClassINET}, Txt: TXTStrings(text)}
		buf := make([]byte, 4096)
		n, err := dns.PackRR(rr, buf, 0, nil, false)
		if err != nil {
			t.Fatalf("%q: %v", text, err)
		}
		back, _, err := dns.UnpackRR(buf[:n], 0)
		if err != nil {
			t.Fatalf("%q: %v", text, err)
		}
		var got strings.Builder
		for _, s := range back.(*dns.TXT).Txt {
			// miekg/dns presents a string as escaped text, as it reads it.
			got.WriteString(strings.NewReplacer(`\\`, `\`, `\"`, `"`).Replace(s))
		}
		if got.String() != text {
			t.Errorf("%q went on the wire as %q", text, got.String())
		}
		for _, s := range rr.Txt {
			if len(strings.ReplaceAll(s, `\\`, `\`)) > 255 {
				t.Errorf("%q: a character-string of %d octets", text, len(s))
			}
		}
	}
}
