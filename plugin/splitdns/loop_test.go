package splitdns

import (
	"testing"

	"github.com/coredns/coredns/plugin/test"
	"github.com/coredns/coredns/request"

	"github.com/miekg/dns"
)

func TestMarkUnmarkRestoresTheQuery(t *testing.T) {
	for _, edns := range []bool{false, true} {
		r := new(dns.Msg)
		r.SetQuestion("example.com.", dns.TypeA)
		if edns {
			r.SetEdns0(4096, true)
		}
		before := r.String()
		if looped(r) {
			t.Fatalf("fresh query seen as looped")
		}
		m := mark(r)
		if !looped(r) {
			t.Fatalf("marked query not seen as looped")
		}
		m.unmark(r)
		if after := r.String(); after != before {
			t.Errorf("edns=%v: query changed by mark/unmark:\n%s\n---\n%s", edns, before, after)
		}
	}
}

func BenchmarkMarkAndCheck(b *testing.B) {
	r := new(dns.Msg)
	r.SetQuestion("host-1.svc.zone-1.corp.", dns.TypeA)
	reply := new(dns.Msg)
	reply.SetReply(r)
	b.ReportAllocs()
	for b.Loop() {
		if looped(r) {
			b.Fatal("looped")
		}
		m := mark(r)
		m.unmark(r)
		m.unmarkReply(reply)
	}
}

func TestFlightKeyTellsQueriesApart(t *testing.T) {
	query := func(edit func(r *dns.Msg, w *test.ResponseWriter)) request.Request {
		r := new(dns.Msg)
		r.SetQuestion("example.com.", dns.TypeA)
		w := &test.ResponseWriter{}
		if edit != nil {
			edit(r, w)
		}
		return request.Request{Req: r, W: w}
	}
	base := newFlightKey(query(nil))
	if k := newFlightKey(query(nil)); k != base {
		t.Errorf("identical queries have different keys")
	}
	marked := query(func(r *dns.Msg, _ *test.ResponseWriter) { mark(r) })
	if k := newFlightKey(marked); k != newFlightKey(query(func(r *dns.Msg, _ *test.ResponseWriter) { r.SetEdns0(dns.MinMsgSize, false) })) {
		t.Errorf("the marker changed the key")
	}
	if k := newFlightKey(query(func(r *dns.Msg, _ *test.ResponseWriter) { r.Question[0].Name = "eXaMPle.COM." })); k != base {
		t.Errorf("the name's case changed the key: a 0x20 relay's copy would be forwarded again")
	}
	for name, edit := range map[string]func(r *dns.Msg, w *test.ResponseWriter){
		"name":   func(r *dns.Msg, _ *test.ResponseWriter) { r.Question[0].Name = "example.net." },
		"type":   func(r *dns.Msg, _ *test.ResponseWriter) { r.Question[0].Qtype = dns.TypeAAAA },
		"class":  func(r *dns.Msg, _ *test.ResponseWriter) { r.Question[0].Qclass = dns.ClassCHAOS },
		"buffer": func(r *dns.Msg, _ *test.ResponseWriter) { r.SetEdns0(4096, false) },
		"do":     func(r *dns.Msg, _ *test.ResponseWriter) { r.SetEdns0(dns.MinMsgSize, true) },
		"cd":     func(r *dns.Msg, _ *test.ResponseWriter) { r.CheckingDisabled = true },
		"tcp":    func(_ *dns.Msg, w *test.ResponseWriter) { w.TCP = true },
		"option": func(r *dns.Msg, _ *test.ResponseWriter) {
			r.SetEdns0(dns.MinMsgSize, false)
			r.IsEdns0().Option = append(r.IsEdns0().Option, &dns.EDNS0_COOKIE{Code: dns.EDNS0COOKIE, Cookie: "0123456789abcdef"})
		},
	} {
		if newFlightKey(query(edit)) == base {
			t.Errorf("%s: the query shares the plain query's key", name)
		}
	}
}

func TestWaiterGetsItsOwnQuestionCase(t *testing.T) {
	leader := new(dns.Msg)
	leader.SetQuestion("wWw.ExAmple.com.", dns.TypeA)
	ret := new(dns.Msg)
	ret.SetReply(leader)
	waiter := new(dns.Msg)
	waiter.SetQuestion("WWW.example.COM.", dns.TypeA)
	got := answerFor(ret, waiter)
	if got.Question[0].Name != waiter.Question[0].Name || got.Id != waiter.Id {
		t.Errorf("waiter's answer has question %q id %d, want %q id %d", got.Question[0].Name, got.Id, waiter.Question[0].Name, waiter.Id)
	}
	if ret.Question[0].Name != leader.Question[0].Name {
		t.Errorf("the leader's answer was changed to %q", ret.Question[0].Name)
	}
}
