package localtargets

import (
	"context"
	"testing"

	"github.com/fleetdns/fleetdns/internal/store"
	"github.com/fleetdns/fleetdns/internal/store/storetest"

	"github.com/coredns/coredns/plugin/pkg/dnstest"
	"github.com/coredns/coredns/plugin/test"
	"github.com/miekg/dns"
)

// nextMarker is the next plugin: it answers REFUSED with a TXT that says it
// was reached, so that a test sees a fall through.
var nextMarker = test.HandlerFunc(func(_ context.Context, w dns.ResponseWriter, r *dns.Msg) (int, error) {
	m := new(dns.Msg)
	m.SetRcode(r, dns.RcodeRefused)
	m.Answer = []dns.RR{test.TXT(r.Question[0].Name + " 0 IN TXT next")}
	w.WriteMsg(m)
	return dns.RcodeRefused, nil
})

func newTestLocalTargets(s *storetest.Store) *LocalTargets {
	s.SetSOA(apexSOA)
	lt := New()
	lt.Zones = []string{"example.org."}
	lt.reader = s
	lt.Next = nextMarker
	return lt
}

var testStore = storetest.New(
	&store.Host{Name: "app.example.org.", A: addrs("10.0.0.1", "10.0.0.2"), AAAA: addrs("fd00::1"), TTL: 15, TTLSet: true},
	&store.Host{Name: "v4only.example.org.", TTL: 30, A: addrs("10.0.1.1")},
	&store.Host{Name: "empty.example.org.", TTL: 30},
	// The k8gb operator wrote both names: its final answer and its localtargets.
	&store.Host{Name: "k8gb.example.org.", TTL: 30, A: addrs("10.9.0.1", "10.9.0.2"), Verbatim: true},
	&store.Host{Name: "localtargets-k8gb.example.org.", TTL: 30, A: addrs("10.9.0.1"), Verbatim: true},
	// Only the final answer, written by k8gb.
	&store.Host{Name: "k8gbonly.example.org.", TTL: 30, A: addrs("10.8.0.1"), Verbatim: true},
)

func nodata(qname string, qtype uint16) test.Case {
	return test.Case{Qname: qname, Qtype: qtype, Rcode: dns.RcodeSuccess,
		Ns: []dns.RR{test.SOA("example.org. 60 IN SOA ns1.example.org. hostmaster.example.org. 1700000000 7200 1800 86400 60")}}
}

func fallsThrough(qname string, qtype uint16) test.Case {
	return test.Case{Qname: qname, Qtype: qtype, Rcode: dns.RcodeRefused,
		Answer: []dns.RR{test.TXT(qname + " 0 IN TXT next")}}
}

func TestServeDNS(t *testing.T) {
	lt := newTestLocalTargets(testStore)
	tests := []struct {
		name string
		tc   test.Case
	}{
		{"A targets with the endpoint TTL", test.Case{Qname: "localtargets-app.example.org.", Qtype: dns.TypeA,
			Answer: []dns.RR{test.A("localtargets-app.example.org. 15 IN A 10.0.0.1"), test.A("localtargets-app.example.org. 15 IN A 10.0.0.2")}}},
		{"AAAA targets", test.Case{Qname: "localtargets-app.example.org.", Qtype: dns.TypeAAAA,
			Answer: []dns.RR{test.AAAA("localtargets-app.example.org. 15 IN AAAA fd00::1")}}},
		{"default TTL without recordTTL", test.Case{Qname: "localtargets-v4only.example.org.", Qtype: dns.TypeA,
			Answer: []dns.RR{test.A("localtargets-v4only.example.org. 30 IN A 10.0.1.1")}}},
		{"AAAA of a v4-only host is NODATA", nodata("localtargets-v4only.example.org.", dns.TypeAAAA)},
		{"other types are NODATA", nodata("localtargets-app.example.org.", dns.TypeTXT)},
		{"host declared without targets is NODATA", nodata("localtargets-empty.example.org.", dns.TypeA)},
		{"unknown host falls through", fallsThrough("localtargets-nope.example.org.", dns.TypeA)},
		{"name without the prefix falls through", fallsThrough("app.example.org.", dns.TypeA)},
		{"prefix alone falls through", fallsThrough("localtargets-.example.org.", dns.TypeA)},
		{"name outside the zones falls through", fallsThrough("localtargets-app.example.net.", dns.TypeA)},
		{"literal localtargets- name falls through to k8scrd", fallsThrough("localtargets-k8gb.example.org.", dns.TypeA)},
		{"k8gb's final answer is never re-assembled", fallsThrough("localtargets-k8gbonly.example.org.", dns.TypeA)},
		{"prefix on a name below an unknown host falls through", fallsThrough("localtargets-x.app.example.org.", dns.TypeA)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			rec := dnstest.NewRecorder(&test.ResponseWriter{})
			if _, err := lt.ServeDNS(context.Background(), rec, tt.tc.Msg()); err != nil {
				t.Fatalf("ServeDNS: %v", err)
			}
			if err := test.SortAndCheck(rec.Msg, tt.tc); err != nil {
				t.Error(err)
			}
			if tt.tc.Rcode == dns.RcodeSuccess && !rec.Msg.Authoritative {
				t.Error("answer is not authoritative (AA off)")
			}
		})
	}
}

func TestQuestionCaseIsPreserved(t *testing.T) {
	lt := newTestLocalTargets(testStore)
	rec := dnstest.NewRecorder(&test.ResponseWriter{})
	m := new(dns.Msg)
	m.SetQuestion("LocalTargets-App.Example.ORG.", dns.TypeA)
	lt.ServeDNS(context.Background(), rec, m)
	if len(rec.Msg.Answer) != 2 {
		t.Fatalf("want 2 answers for a mixed-case question, got %v", rec.Msg.Answer)
	}
	if got := rec.Msg.Answer[0].Header().Name; got != "LocalTargets-App.Example.ORG." {
		t.Errorf("answer owner %q, want the question's case", got)
	}
}

func TestCustomPrefix(t *testing.T) {
	lt := newTestLocalTargets(testStore)
	lt.prefix = "lt-"
	for _, tc := range []test.Case{
		{Qname: "lt-v4only.example.org.", Qtype: dns.TypeA, Answer: []dns.RR{test.A("lt-v4only.example.org. 30 IN A 10.0.1.1")}},
		fallsThrough("localtargets-v4only.example.org.", dns.TypeA),
	} {
		rec := dnstest.NewRecorder(&test.ResponseWriter{})
		lt.ServeDNS(context.Background(), rec, tc.Msg())
		if err := test.SortAndCheck(rec.Msg, tc); err != nil {
			t.Error(err)
		}
	}
}

func TestBeforeFirstSyncFallsThrough(t *testing.T) {
	s := storetest.New(&store.Host{Name: "app.example.org.", TTL: 30, A: addrs("10.0.0.1")})
	s.SetSynced(false)
	lt := newTestLocalTargets(s)
	tc := fallsThrough("localtargets-app.example.org.", dns.TypeA)
	rec := dnstest.NewRecorder(&test.ResponseWriter{})
	lt.ServeDNS(context.Background(), rec, tc.Msg())
	if err := test.SortAndCheck(rec.Msg, tc); err != nil {
		t.Error(err)
	}
}

func TestApexSOAForNegativeAnswer(t *testing.T) {
	// The host at the apex: k8scrd answers its SOA query in the answer section.
	s := storetest.New(&store.Host{Name: "example.org.", TTL: 30})
	lt := newTestLocalTargets(s)
	lt.Zones = []string{"org."}
	tc := test.Case{Qname: "localtargets-example.org.", Qtype: dns.TypeA,
		Ns: []dns.RR{test.SOA("example.org. 60 IN SOA ns1.example.org. hostmaster.example.org. 1700000000 7200 1800 86400 60")}}
	rec := dnstest.NewRecorder(&test.ResponseWriter{})
	lt.ServeDNS(context.Background(), rec, tc.Msg())
	if err := test.SortAndCheck(rec.Msg, tc); err != nil {
		t.Error(err)
	}
}

func TestHealthyWithoutChecksIsEverything(t *testing.T) {
	lt := newTestLocalTargets(testStore)
	h, _ := testStore.Host("app.example.org.")
	a, aaaa := lt.Healthy(h)
	if len(a) != 2 || len(aaaa) != 1 {
		t.Errorf("Healthy without checks = %v %v, want all targets", a, aaaa)
	}
}

var (
	_ store.Targets                = (*LocalTargets)(nil)
	_ interface{ Prefix() string } = (*LocalTargets)(nil) // what gslb asks for
)
