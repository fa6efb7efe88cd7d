package k8scrd

import (
	"fmt"
	"net/netip"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/coredns/coredns/plugin/test"
	"github.com/fleetdns/fleetdns/internal/store"
	"github.com/fleetdns/fleetdns/internal/testkit"
	"github.com/fleetdns/fleetdns/plugin/k8scrd/builder"
	"github.com/fleetdns/fleetdns/plugin/k8scrd/object"
	"github.com/miekg/dns"
	"github.com/prometheus/client_golang/prometheus/testutil"
)

// withCreated adds a creationTimestamp to a manifest rendered by dnsEndpoint.
func withCreated(manifest, ts string) string {
	return strings.Replace(manifest, "metadata:\n", "metadata:\n  creationTimestamp: \""+ts+"\"\n", 1)
}

func TestSameNameAcrossObjectsMergedDedupedMinTTL(t *testing.T) {
	k, _ := newTestPlugin(t, "example.org", zoneBody, map[string]string{
		"a.yaml": testkit.DNSEndpoint("team-a", "one", nil, testkit.EP("m.example.org", "A", 300, "192.0.2.3", "192.0.2.1")),
		"b.yaml": testkit.DNSEndpoint("team-b", "two", nil, testkit.EP("m.example.org", "A", 60, "192.0.2.1", "192.0.2.2"),
			testkit.EP("m.example.org", "TXT", 0, "owner=b")),
	})
	resp, _ := ask(t, k, "m.example.org.", dns.TypeA)
	want := "m.example.org.\t60\tIN\tA\t192.0.2.1\nm.example.org.\t60\tIN\tA\t192.0.2.2\nm.example.org.\t60\tIN\tA\t192.0.2.3"
	if got := answers(resp); got != want {
		t.Errorf("merged RRset (deduplicated, ordered, smallest TTL):\n got %s\nwant %s", got, want)
	}
	// The order is the same on every query (no map order leaks through).
	for range 20 {
		if r, _ := ask(t, k, "m.example.org.", dns.TypeA); answers(r) != want {
			t.Fatalf("order changed between queries:\n%s", answers(r))
		}
	}
	h, ok := k.Store().Host("m.example.org.")
	if !ok || !slices.Equal(h.A, []netip.Addr{netip.MustParseAddr("192.0.2.1"), netip.MustParseAddr("192.0.2.2"), netip.MustParseAddr("192.0.2.3")}) || h.TTL != 60 || !h.TTLSet {
		t.Errorf("store host: %+v", h)
	}
}

func TestTenancyStrictFirstNamespaceOwnsName(t *testing.T) {
	before := metricValue(t, "coredns_k8scrd_tenancy_skipped_endpoints")
	files := map[string]string{
		"old.yaml": withCreated(testkit.DNSEndpoint("team-a", "old", nil, testkit.EP("t.example.org", "A", 0, "192.0.2.1")), "2024-01-01T00:00:00Z"),
		"new.yaml": withCreated(testkit.DNSEndpoint("team-b", "new", nil, testkit.EP("t.example.org", "A", 0, "192.0.2.66"), testkit.EP("t.example.org", "TXT", 0, "hijack"),
			testkit.EP("free.example.org", "A", 0, "192.0.2.7")), "2025-01-01T00:00:00Z"),
		"same.yaml": withCreated(testkit.DNSEndpoint("team-a", "more", nil, testkit.EP("t.example.org", "A", 0, "192.0.2.2")), "2025-06-01T00:00:00Z"),
	}
	k, dir := newTestPlugin(t, "example.org", zoneBody+"\ntenancy strict", files)
	check(t, k, []test.Case{
		{Qname: "t.example.org.", Qtype: dns.TypeA, Authoritative: true,
			Answer: []dns.RR{test.A("t.example.org. 30 IN A 192.0.2.1"), test.A("t.example.org. 30 IN A 192.0.2.2")}},
		{Qname: "t.example.org.", Qtype: dns.TypeTXT, Authoritative: true, Ns: []dns.RR{negSOA}},
		// team-b's other names are its own.
		{Qname: "free.example.org.", Qtype: dns.TypeA, Authoritative: true,
			Answer: []dns.RR{test.A("free.example.org. 30 IN A 192.0.2.7")}},
	})
	if d := metricValue(t, "coredns_k8scrd_tenancy_skipped_endpoints") - before; d != 2 {
		t.Errorf("tenancy-skipped endpoints: %v, want 2", d)
	}
	// When the owner's objects go, the name passes to the next namespace in line.
	os.Remove(filepath.Join(dir, "old.yaml"))
	os.Remove(filepath.Join(dir, "same.yaml"))
	testkit.Eventually(t, 5*time.Second, "ownership passes to team-b", hasA(k, t, "t.example.org.", "192.0.2.66"))
	testkit.Eventually(t, 5*time.Second, "skip gauge back to zero", func() bool { return metricValue(t, "coredns_k8scrd_tenancy_skipped_endpoints") == before })
}

func TestTenancySharedMergesNamespaces(t *testing.T) {
	k, _ := newTestPlugin(t, "example.org", zoneBody, map[string]string{
		"a.yaml": testkit.DNSEndpoint("team-a", "a", nil, testkit.EP("t.example.org", "A", 0, "192.0.2.1")),
		"b.yaml": testkit.DNSEndpoint("team-b", "b", nil, testkit.EP("t.example.org", "A", 0, "192.0.2.2")),
	})
	if r, _ := ask(t, k, "t.example.org.", dns.TypeA); len(r.Answer) != 2 {
		t.Errorf("tenancy shared: want both namespaces' targets, got\n%s", answers(r))
	}
}

func TestCNAMEBesideOtherDataSkippedAndCounted(t *testing.T) {
	before := metricValue(t, "coredns_k8scrd_cname_conflicts")
	k, _ := newTestPlugin(t, "example.org", zoneBody, map[string]string{
		"a.yaml": testkit.DNSEndpoint("ns", "a", nil, testkit.EP("c.example.org", "A", 0, "192.0.2.1"), testkit.EP("c.example.org", "CNAME", 0, "www.example.org"),
			testkit.EP("example.org", "CNAME", 0, "www.example.org")),
	})
	check(t, k, []test.Case{
		{Qname: "c.example.org.", Qtype: dns.TypeA, Authoritative: true,
			Answer: []dns.RR{test.A("c.example.org. 30 IN A 192.0.2.1")}},
		{Qname: "c.example.org.", Qtype: dns.TypeCNAME, Authoritative: true, Ns: []dns.RR{negSOA}},
		// A CNAME at the apex sits beside SOA and NS: skipped.
		{Qname: "example.org.", Qtype: dns.TypeA, Authoritative: true, Ns: []dns.RR{negSOA}},
	})
	if d := metricValue(t, "coredns_k8scrd_cname_conflicts") - before; d != 2 {
		t.Errorf("CNAME conflicts: %v, want 2", d)
	}
}

func TestInvalidEndpointsSkippedRestServed(t *testing.T) {
	reasons := []string{object.ReasonTarget, object.ReasonType, object.ReasonName, object.ReasonCNAMEs}
	before := map[string]float64{}
	for _, r := range reasons {
		before[r] = testutil.ToFloat64(object.InvalidEndpoints.WithLabelValues(r))
	}
	k, _ := newTestPlugin(t, "example.org", zoneBody, map[string]string{
		"a.yaml": testkit.DNSEndpoint("ns", "a", nil,
			testkit.EP("ok.example.org", "A", 0, "192.0.2.1"),
			testkit.EP("v6.example.org", "A", 0, "2001:db8::1"),
			testkit.EP("bad.example.org", "AAAA", 0, "192.0.2.1"),
			testkit.EP("srv.example.org", "SRV", 0, "10 mail.example.org"),
			testkit.EP("mx.example.org", "MX", 0, "high mail.example.org"),
			testkit.EP("alias.example.org", "ALIAS", 0, "www.example.org"),
			testkit.EP("bad name.example.org", "A", 0, "192.0.2.1"),
			testkit.EP("two.example.org", "CNAME", 0, "a.example.org", "b.example.org"),
			testkit.EP("ok2.example.org", "TXT", 0, "still here")),
	})
	check(t, k, []test.Case{
		{Qname: "ok.example.org.", Qtype: dns.TypeA, Authoritative: true,
			Answer: []dns.RR{test.A("ok.example.org. 30 IN A 192.0.2.1")}},
		{Qname: "ok2.example.org.", Qtype: dns.TypeTXT, Authoritative: true,
			Answer: []dns.RR{test.TXT(`ok2.example.org. 30 IN TXT "still here"`)}},
		{Qname: "v6.example.org.", Qtype: dns.TypeA, Authoritative: true, Rcode: dns.RcodeNameError, Ns: []dns.RR{negSOA}},
		{Qname: "srv.example.org.", Qtype: dns.TypeSRV, Authoritative: true, Rcode: dns.RcodeNameError, Ns: []dns.RR{negSOA}},
	})
	want := map[string]float64{object.ReasonTarget: 4, object.ReasonType: 1, object.ReasonName: 1, object.ReasonCNAMEs: 1}
	for _, r := range reasons {
		if d := testutil.ToFloat64(object.InvalidEndpoints.WithLabelValues(r)) - before[r]; d != want[r] {
			t.Errorf("invalid endpoints, reason %s: %v, want %v", r, d, want[r])
		}
	}
}

func TestEmptyNonTerminalGoesWithItsLastDescendant(t *testing.T) {
	k, dir := newTestPlugin(t, "example.org", zoneBody, map[string]string{
		"a.yaml": testkit.DNSEndpoint("ns", "a", nil, testkit.EP("x.y.z.example.org", "A", 0, "192.0.2.1")),
		"b.yaml": testkit.DNSEndpoint("ns", "b", nil, testkit.EP("w.z.example.org", "A", 0, "192.0.2.2")),
	})
	rcode := func(name string) int { r, _ := ask(t, k, name, dns.TypeA); return r.Rcode }
	if rcode("y.z.example.org.") != dns.RcodeSuccess || rcode("z.example.org.") != dns.RcodeSuccess {
		t.Fatal("empty non-terminals y.z and z should be NODATA")
	}
	os.Remove(filepath.Join(dir, "a.yaml"))
	testkit.Eventually(t, 5*time.Second, "y.z gone with x.y.z", func() bool { return rcode("y.z.example.org.") == dns.RcodeNameError })
	if rcode("z.example.org.") != dns.RcodeSuccess {
		t.Error("z.example.org still has w.z below it: want NODATA")
	}
	os.Remove(filepath.Join(dir, "b.yaml"))
	testkit.Eventually(t, 5*time.Second, "z gone with w.z", func() bool { return rcode("z.example.org.") == dns.RcodeNameError })
}

func TestStoreReaderForOtherPlugins(t *testing.T) {
	k, _ := newTestPlugin(t, "gslb.example.org", "", map[string]string{
		"a.yaml": testkit.DNSEndpoint("k8gb", "app", map[string]string{"k8gb.io/dnstype": "local"},
			testkit.Endpoint{DNSName: "app.gslb.example.org", RecordType: "A", TTL: 30, Targets: []string{"10.0.0.1"},
				ProviderSpecific: [][2]string{{"gslb/strategy", "failover"}}, Labels: map[string]string{"strategy": "failover"}},
			testkit.EP("app.gslb.example.org", "AAAA", 0, "2001:db8::1"),
			testkit.EP("declared.gslb.example.org", "A", 0),
			testkit.EP("alias.gslb.example.org", "CNAME", 0, "app.example.net")),
	})
	r := k.Store()
	if !r.Synced() {
		t.Fatal("not synced")
	}
	h, ok := r.Host("app.gslb.example.org.")
	if !ok || len(h.A) != 1 || len(h.AAAA) != 1 || !h.AddressDeclared || h.TTL != 30 || !h.TTLSet || !h.Verbatim ||
		h.Properties["gslb/strategy"] != "failover" || h.Labels["strategy"] != "failover" {
		t.Errorf("host: %+v", h)
	}
	if d, ok := r.Host("declared.gslb.example.org."); !ok || len(d.A) != 0 || !d.AddressDeclared || d.TTLSet || d.TTL != 30 {
		t.Errorf("a declaration without targets is a host with none: %+v, %v", d, ok)
	}
	if a, ok := r.Host("alias.gslb.example.org."); !ok || a.AddressDeclared || len(a.A) != 0 {
		t.Errorf("a CNAME alone declares no address: %+v, %v", a, ok)
	}
	if _, ok := r.Host("gslb.example.org."); ok {
		t.Error("apex has no endpoints: want not ok")
	}
	var names []string
	r.Hosts("gslb.example.org.", func(h *store.Host) bool { names = append(names, h.Name); return true })
	slices.Sort(names)
	if !slices.Equal(names, []string{"alias.gslb.example.org.", "app.gslb.example.org.", "declared.gslb.example.org."}) {
		t.Errorf("Hosts walked %v", names)
	}
}

func TestBurstOfEventsCoalescedIntoFewSwaps(t *testing.T) {
	k, _ := newTestPlugin(t, "example.org", zoneBody, nil)
	cfg := k.cfg
	objs := make([]*object.Object, 1000)
	for i := range objs {
		objs[i] = benchObject(cfg, i, 1, "192.0.2.1")
	}
	before := k.builder.Swaps()
	start := time.Now()
	for _, o := range objs {
		k.builder.Upsert(o)
	}
	queued := time.Since(start)
	testkit.Eventually(t, 5*time.Second, "burst applied", hasA(k, t, "host999-0.team49.example.org.", "192.0.2.1"))
	// A swap starts at least builder.BatchDelay after the previous one, and one swap
	// takes everything pending: the events queued while n windows of
	// batchDelay passed make at most n+2 swaps (one or two on a fast
	// machine; a slow one queues over more windows, never one swap each).
	want := int64(queued/builder.BatchDelay) + 2
	if n := k.builder.Swaps() - before; n > want {
		t.Errorf("1000 events queued in %v made %d snapshot swaps, want at most %d", queued, n, want)
	}
	for i := range 1000 {
		if i%97 == 0 && !hasA(k, t, fmt.Sprintf("host%d-0.team%d.example.org.", i, i%50), "192.0.2.1")() {
			t.Errorf("object %d of the burst not served", i)
		}
	}
}
