package k8scrd_test

import (
	"fmt"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/fleetdns/fleetdns/test/harness"
	"github.com/miekg/dns"
)

// axfr transfers zone from addr with the real dig and returns the records.
func axfr(t *testing.T, addr, zone string) []dns.RR {
	t.Helper()
	out := harness.Dig(t, addr, "+time=5", "+tries=1", "AXFR", zone)
	zp := dns.NewZoneParser(strings.NewReader(out), "", "")
	var rrs []dns.RR
	for rr, ok := zp.Next(); ok; rr, ok = zp.Next() {
		rrs = append(rrs, rr)
	}
	if err := zp.Err(); err != nil {
		t.Fatalf("dig AXFR %s: %v\n%s", zone, err, out)
	}
	if len(rrs) < 2 || rrs[0].Header().Rrtype != dns.TypeSOA || rrs[len(rrs)-1].Header().Rrtype != dns.TypeSOA {
		t.Fatalf("dig AXFR %s: not framed by SOA records:\n%s", zone, out)
	}
	return rrs
}

// zoneRecords returns the set of records of a zone (transfer or zone file)
// as sorted strings, serial zeroed, the closing SOA of a transfer dropped.
func zoneRecords(rrs []dns.RR) []string {
	var body []dns.RR
	for i, rr := range rrs {
		if i == len(rrs)-1 && i > 0 && rr.Header().Rrtype == dns.TypeSOA && rrs[0].Header().Rrtype == dns.TypeSOA {
			break
		}
		rr = dns.Copy(rr)
		if soa, ok := rr.(*dns.SOA); ok {
			soa.Serial = 0
		}
		body = append(body, rr)
	}
	return harness.RRStrings(body)
}

func parseZone(t *testing.T, text, origin string) []dns.RR {
	t.Helper()
	zp := dns.NewZoneParser(strings.NewReader(text), origin, "")
	var rrs []dns.RR
	for rr, ok := zp.Next(); ok; rr, ok = zp.Next() {
		rrs = append(rrs, rr)
	}
	if err := zp.Err(); err != nil {
		t.Fatal(err)
	}
	return rrs
}

func soaSerial(t *testing.T, addr, zone string) uint32 {
	t.Helper()
	r := harness.Exchange(t, addr, zone, dns.TypeSOA, harness.NoRD)
	for _, rr := range r.Answer {
		if soa, ok := rr.(*dns.SOA); ok {
			return soa.Serial
		}
	}
	t.Fatalf("no SOA for %s: %v", zone, r)
	return 0
}

// TestAXFRToStockSecondary: a k8scrd zone (from the API server) transfers
// whole to dig and to a stock `secondary` instance, which then answers every
// differential query as k8scrd does (where the secondary's file code departs
// from RFC 2308 and k8scrd agrees with NSD, NSD wins, as in the differential
// test). A later change shows in a new transfer with a higher serial.
func TestAXFRToStockSecondary(t *testing.T) {
	k := harness.SharedKube(t)
	ns := k.NewNamespace(t, "axfr")
	for _, o := range diffObjects(ns) {
		k.Create(t, o)
	}
	primary := startK8sCRD(t, diffZone, source{kubeconfig: k.Kubeconfig}, append([]string{"namespaces " + ns}, diffStanza...),
		[]string{"transfer {\n        to *\n    }"}, true)

	want := zoneRecords(parseZone(t, diffZoneFile, diffZone))
	got := zoneRecords(axfr(t, primary.Addr, diffZone))
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Fatalf("AXFR of %s differs from the zone file\ntransfer:\n%s\nzone file:\n%s", diffZone, strings.Join(got, "\n"), strings.Join(want, "\n"))
	}

	ip := harness.NewIP(t)
	secondary := harness.StartCoreDNS(t, fmt.Sprintf("%s {\n  bind %s\n  secondary {\n    transfer from %s\n  }\n}\n", diffZone, ip, primary.Addr),
		harness.WithProbe(diffZone, dns.TypeSOA))
	nsd := harness.StartNSD(t, map[string]string{diffZone: diffZoneFile}, "minimal-responses: yes")
	for _, q := range diffQueries {
		label := fmt.Sprintf("%s %s", q.name, dns.TypeToString[q.qtype])
		opts := []harness.QueryOption{harness.NoRD, harness.EDNS(1232)}
		pm := harness.Exchange(t, primary.Addr, q.name, q.qtype, opts...)
		sm := harness.Exchange(t, secondary.Addr, q.name, q.qtype, opts...)
		pv, sv := viewOf(pm), fileNegativeTTL(viewOf(sm), sm)
		if pv.equal(sv) {
			continue
		}
		if nv := viewOf(harness.Exchange(t, nsd.Addr, q.name, q.qtype, opts...)); pv.equal(nv) {
			t.Logf("%s: the secondary (file code) departs from NSD; k8scrd agrees with NSD\nsecondary: %s\nNSD:       %s", label, sv, nv)
			continue
		}
		t.Errorf("%s: the secondary answers differently from k8scrd\nsecondary: %s\nk8scrd:    %s", label, sv, pv)
	}

	// A change: a new transfer carries it, under a higher serial.
	before := soaSerial(t, primary.Addr, diffZone)
	time.Sleep(1100 * time.Millisecond) // the serial is the change's Unix time
	k.CreateDNSEndpoint(t, ns, "late", nil, a("late.diff.example", "192.0.2.77"))
	waitA(t, primary.Addr, "late.diff.example", "192.0.2.77", propagationBound)
	if after := soaSerial(t, primary.Addr, diffZone); after <= before {
		t.Errorf("SOA serial %d after a change, was %d: it must grow", after, before)
	}
	got = zoneRecords(axfr(t, primary.Addr, diffZone))
	if i := sort.SearchStrings(got, "late.diff.example. 300 IN A 192.0.2.77"); i == len(got) || got[i] != "late.diff.example. 300 IN A 192.0.2.77" {
		t.Errorf("the new record is not in a new transfer:\n%s", strings.Join(got, "\n"))
	}
}
