package k8scrd

import (
	"context"
	"strconv"
	"testing"

	"github.com/coredns/coredns/plugin/pkg/dnstest"
	"github.com/coredns/coredns/plugin/test"
	"github.com/coredns/coredns/plugin/transfer"
	"github.com/coredns/coredns/request"
	"github.com/fleetdns/fleetdns/internal/testkit"
	"github.com/miekg/dns"
)

func TestTransferWholeZoneBetweenSOAs(t *testing.T) {
	k, _ := newTestPlugin(t, "example.org", zoneBody, zoneManifests)
	ch, err := k.Transfer("example.org.", 0)
	if err != nil {
		t.Fatal(err)
	}
	var rrs []dns.RR
	for set := range ch {
		rrs = append(rrs, set...)
	}
	if len(rrs) < 3 || rrs[0].Header().Rrtype != dns.TypeSOA || rrs[len(rrs)-1].Header().Rrtype != dns.TypeSOA {
		t.Fatalf("transfer must start and end with the SOA: %v", rrs)
	}
	seen := map[string]bool{}
	for _, rr := range rrs[1 : len(rrs)-1] {
		seen[rr.String()] = true
		if !dns.IsSubDomain("example.org.", rr.Header().Name) {
			t.Errorf("record outside the zone: %s", rr)
		}
	}
	for _, want := range []string{
		"example.org.\t30\tIN\tNS\tns1.example.org.",
		"www.example.org.\t60\tIN\tA\t192.0.2.10",
		"*.apps.example.org.\t30\tIN\tA\t192.0.2.80",
		"sub.example.org.\t30\tIN\tNS\tns1.sub.example.org.",
		"ns1.sub.example.org.\t30\tIN\tA\t192.0.2.53",
		"app.example.org.\t30\tIN\tCNAME\talias.example.org.",
	} {
		if !seen[want] {
			t.Errorf("transfer lacks %q", want)
		}
	}
	// RRs of the other zone (2.0.192.in-addr.arpa is not configured here) never appear.
	if seen["10.2.0.192.in-addr.arpa.\t30\tIN\tPTR\twww.example.org."] {
		t.Error("out-of-zone PTR transferred")
	}
}

func TestTransferCurrentSerialIsSOAOnly(t *testing.T) {
	k, _ := newTestPlugin(t, "example.org", zoneBody, zoneManifests)
	serial := k.snap.Load().Zones["example.org."].Serial
	ch, err := k.Transfer("example.org.", serial)
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for set := range ch {
		n += len(set)
	}
	if n != 1 {
		t.Errorf("IXFR at the current serial: %d records, want the SOA alone", n)
	}
	if _, err := k.Transfer("other.org.", 0); err != transfer.ErrNotAuthoritative {
		t.Errorf("foreign zone: %v, want ErrNotAuthoritative", err)
	}
	if _, err := k.Transfer("sub.example.org.", 0); err != transfer.ErrNotAuthoritative {
		t.Errorf("a name inside the zone is not a zone: %v", err)
	}
}

func TestAXFRQueryWithoutTransferPluginRefused(t *testing.T) {
	k, _ := newTestPlugin(t, "example.org", zoneBody, zoneManifests)
	if _, code := ask(t, k, "example.org.", dns.TypeAXFR); code != dns.RcodeRefused {
		t.Errorf("AXFR without the transfer plugin: %s, want REFUSED", dns.RcodeToString[code])
	}
}

func TestTruncatedOverUDPWholeOverTCPAndEDNS0(t *testing.T) {
	var targets []string
	for i := range 100 {
		targets = append(targets, "192.0.2."+strconv.Itoa(i+1))
	}
	k, _ := newTestPlugin(t, "example.org", zoneBody, map[string]string{
		"big.yaml": testkit.DNSEndpoint("ns", "big", nil, testkit.EP("big.example.org", "A", 0, targets...)),
	})
	query := func(proto string, bufsize uint16) *dns.Msg {
		m := new(dns.Msg)
		m.SetQuestion("big.example.org.", dns.TypeA)
		if bufsize > 0 {
			m.SetEdns0(bufsize, false)
		}
		rec := dnstest.NewRecorder(&test.ResponseWriter{TCP: proto == "tcp"})
		// The server wraps every writer like this: replies that do not fit get TC.
		w := request.NewScrubWriter(m, rec)
		if _, err := k.ServeDNS(context.Background(), w, m); err != nil {
			t.Fatal(err)
		}
		return rec.Msg
	}
	if r := query("udp", 0); !r.Truncated || len(r.Answer) == 100 || r.Len() > 512 {
		t.Errorf("UDP, 512 bytes: TC %v, %d answers, %d bytes; want TC and a fit", r.Truncated, len(r.Answer), r.Len())
	}
	if r := query("udp", 4096); r.Truncated || len(r.Answer) != 100 || r.IsEdns0() == nil {
		t.Errorf("UDP with EDNS0 4096: TC %v, %d answers, OPT %v; want all 100 and an OPT", r.Truncated, len(r.Answer), r.IsEdns0())
	}
	if r := query("tcp", 0); r.Truncated || len(r.Answer) != 100 {
		t.Errorf("TCP: TC %v, %d answers; want all 100", r.Truncated, len(r.Answer))
	}
}
