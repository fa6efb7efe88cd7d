package localtargets

import (
	"context"
	"testing"

	"github.com/coredns/caddy"
	"github.com/coredns/coredns/plugin/pkg/dnstest"
	"github.com/coredns/coredns/plugin/test"
	"github.com/miekg/dns"
)

// The fuzz targets below run their committed seeds (testdata/fuzz/<name>/)
// as ordinary tests; `make fuzz` explores further. Peers asking
// localtargets-<host> are untrusted: whatever they send is answered or
// passed on, never a panic.

// FuzzParse feeds arbitrary Corefile text to the localtargets stanza parser.
func FuzzParse(f *testing.F) {
	f.Add("localtargets example.org {\n prefix localtargets-\n healthcheck http 80 /healthz app.example.org {\n  interval 5s\n  timeout 1s\n  fails 3\n  passes 2\n }\n}")
	f.Fuzz(func(t *testing.T, input string) {
		lt, _, err := parse(caddy.NewTestController("dns", input))
		if err == nil && lt == nil {
			t.Fatal("parse returned neither a plugin nor an error")
		}
	})
}

// FuzzServeDNS serves arbitrary wire-format queries from the test store.
func FuzzServeDNS(f *testing.F) {
	for _, q := range []struct {
		name  string
		qtype uint16
	}{
		{"localtargets-app.example.org.", dns.TypeA}, {"LocalTargets-App.Example.org.", dns.TypeAAAA},
		{"localtargets-v4only.example.org.", dns.TypeAAAA}, {"localtargets-empty.example.org.", dns.TypeA},
		{"localtargets-k8gb.example.org.", dns.TypeA}, {"localtargets-k8gbonly.example.org.", dns.TypeA},
		{"localtargets-.example.org.", dns.TypeA}, {"localtargets-app.example.org.", dns.TypeANY},
		{"app.example.org.", dns.TypeA},
	} {
		m := new(dns.Msg)
		m.SetQuestion(q.name, q.qtype)
		b, _ := m.Pack()
		f.Add(b)
	}
	lt := newTestLocalTargets(testStore)
	f.Fuzz(func(t *testing.T, wire []byte) {
		r := new(dns.Msg)
		if r.Unpack(wire) != nil || len(r.Question) == 0 {
			return // the server answers FORMERR before any plugin sees it
		}
		rec := dnstest.NewRecorder(&test.ResponseWriter{})
		if _, err := lt.ServeDNS(context.Background(), rec, r); err != nil || rec.Msg == nil {
			return
		}
		if _, err := rec.Msg.Pack(); err != nil {
			t.Fatalf("reply does not pack: %v\n%s", err, rec.Msg)
		}
		q := r.Question[0]
		for _, rr := range rec.Msg.Answer {
			if rr.Header().Rrtype != q.Qtype && rec.Msg.Rcode == dns.RcodeSuccess && rr.Header().Rrtype != dns.TypeTXT {
				t.Fatalf("%s answer to a %s question:\n%s", dns.TypeToString[rr.Header().Rrtype], dns.TypeToString[q.Qtype], rec.Msg)
			}
		}
	})
}
