package gslb

import (
	"fmt"
	"testing"

	"github.com/fleetdns/fleetdns/internal/testkit"
	"github.com/fleetdns/fleetdns/test/harness"

	"github.com/miekg/dns"
)

// TestGSLBZoneIsNotTransferred: in a block serving a GSLB zone and another
// k8scrd zone with `transfer { to * }`, an AXFR of the other zone hands over
// its records, and an AXFR of the GSLB zone hands over none (its answers are
// assembled at query time; a secondary would serve static declarations).
func TestGSLBZoneIsNotTransferred(t *testing.T) {
	harness.RequirePlugins(t, "gslb", "k8scrd")
	ip := harness.NewIP(t)
	const other = "static.example.org."
	dir := t.TempDir()
	testkit.WriteFile(t, dir, "hosts.yaml", testkit.DNSEndpoint("apps", "hosts", nil,
		testkit.Endpoint{DNSName: hostRR, RecordType: "A", TTL: 5, Targets: []string{"10.1.0.1"}},
		testkit.Endpoint{DNSName: "www." + other, RecordType: "A", TTL: 5, Targets: []string{"192.0.2.7"}}))
	srv := harness.StartCoreDNS(t, fmt.Sprintf(`%s:53 %s:53 {
    bind %s
    gslb %s {
        geotag eu
    }
    k8scrd %s %s {
        directory %s
    }
    transfer {
        to *
    }
    errors
}
`, zone, other, ip, zone, zone, other, dir), harness.WithProbe("www."+other, dns.TypeA))

	axfr := func(z string) (records int, err error) {
		m := new(dns.Msg)
		m.SetAxfr(dns.Fqdn(z))
		env, err := (&dns.Transfer{}).In(m, srv.Addr)
		if err != nil {
			return 0, err
		}
		for e := range env {
			if e.Error != nil {
				err = e.Error
			}
			records += len(e.RR)
		}
		return records, err
	}
	if n, err := axfr(other); err != nil || n < 3 {
		t.Fatalf("AXFR %s: %d records, %v; want the zone (SOA, data, SOA)", other, n, err)
	}
	if n, err := axfr(zone); err == nil || n != 0 {
		// err carries the REFUSED rcode.
		t.Fatalf("AXFR %s (a GSLB zone): %d records, err %v; want it refused with no records", zone, n, err)
	}
}
