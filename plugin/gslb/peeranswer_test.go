package gslb

import (
	"fmt"
	"testing"

	"github.com/miekg/dns"
)

func TestParsePeerAnswer(t *testing.T) {
	const qn = "localtargets-app.gslb.example.com."
	q := new(dns.Msg)
	q.SetQuestion(qn, dns.TypeA)
	reply := func(edit func(r *dns.Msg)) *dns.Msg {
		r := new(dns.Msg)
		r.SetReply(q)
		edit(r)
		return r
	}
	a := func(name, ip string, ttl uint32) dns.RR {
		rr, _ := dns.NewRR(fmt.Sprintf("%s %d IN A %s", name, ttl, ip))
		return rr
	}
	many := func(r *dns.Msg) {
		for i := range 100 {
			r.Answer = append(r.Answer, a(qn, fmt.Sprintf("10.0.%d.%d", i/250, i%250+1), 30))
		}
	}
	for _, c := range []struct {
		name    string
		r       *dns.Msg
		reason  string
		n       int
		ttl     uint32
		dropped int
	}{
		{"data", reply(func(r *dns.Msg) {
			r.Answer = []dns.RR{a(qn, "10.0.0.1", 30), a(qn, "10.0.0.2", 10), a(qn, "10.0.0.1", 30)}
		}), "", 2, 10, 0},
		{"nodata with SOA", reply(func(r *dns.Msg) {
			r.Ns = []dns.RR{negativeSOA()}
		}), "", 0, 60, 0},
		{"nxdomain", reply(func(r *dns.Msg) { r.Rcode = dns.RcodeNameError }), "", 0, 0, 0},
		{"no AA is fine", reply(func(r *dns.Msg) { r.Authoritative = false; r.Answer = []dns.RR{a(qn, "10.0.0.1", 5)} }), "", 1, 5, 0},
		{"case differs", reply(func(r *dns.Msg) { r.Answer = []dns.RR{a("LOCALTARGETS-app.gslb.example.com.", "10.0.0.1", 5)} }), "", 1, 5, 0},
		{"too many targets bounded", reply(many), "", maxTargets, 30, 100 - maxTargets},
		{"nil", nil, reasonMalformed, 0, 0, 0},
		{"servfail", reply(func(r *dns.Msg) { r.Rcode = dns.RcodeServerFailure }), reasonRcode, 0, 0, 0},
		{"refused", reply(func(r *dns.Msg) { r.Rcode = dns.RcodeRefused }), reasonRcode, 0, 0, 0},
		{"wrong id", reply(func(r *dns.Msg) { r.Id++ }), reasonWrongID, 0, 0, 0},
		{"not a response", reply(func(r *dns.Msg) { r.Response = false }), reasonMalformed, 0, 0, 0},
		{"wrong question", reply(func(r *dns.Msg) { r.Question[0].Name = "localtargets-other.gslb.example.com." }), reasonWrongQuestion, 0, 0, 0},
		{"wrong qtype", reply(func(r *dns.Msg) { r.Question[0].Qtype = dns.TypeAAAA }), reasonWrongQuestion, 0, 0, 0},
		{"no question", reply(func(r *dns.Msg) { r.Question = nil }), reasonWrongQuestion, 0, 0, 0},
		{"other owner", reply(func(r *dns.Msg) { r.Answer = []dns.RR{a("evil.example.", "10.0.0.1", 5)} }), reasonWrongType, 0, 0, 0},
		{"cname", reply(func(r *dns.Msg) {
			r.Answer = []dns.RR{&dns.CNAME{Hdr: dns.RR_Header{Name: qn, Rrtype: dns.TypeCNAME, Class: dns.ClassINET}, Target: "x."}}
		}), reasonWrongType, 0, 0, 0},
		{"nxdomain with data", reply(func(r *dns.Msg) { r.Rcode = dns.RcodeNameError; r.Answer = []dns.RR{a(qn, "10.0.0.1", 5)} }), reasonMalformed, 0, 0, 0},
		{"bad address", reply(func(r *dns.Msg) {
			r.Answer = []dns.RR{&dns.A{Hdr: dns.RR_Header{Name: qn, Rrtype: dns.TypeA, Class: dns.ClassINET}, A: nil}}
		}), reasonMalformed, 0, 0, 0},
	} {
		pa, err := parsePeerAnswer(q, c.r)
		if c.reason != "" {
			if err == nil || reasonOf(err) != c.reason {
				t.Errorf("%s: error %v, want reason %s", c.name, err, c.reason)
			}
			continue
		}
		if err != nil {
			t.Errorf("%s: %v", c.name, err)
			continue
		}
		if len(pa.addrs) != c.n || pa.ttl != c.ttl || pa.dropped != c.dropped {
			t.Errorf("%s: %d targets ttl %d dropped %d, want %d ttl %d dropped %d", c.name, len(pa.addrs), pa.ttl, pa.dropped, c.n, c.ttl, c.dropped)
		}
	}
}

func negativeSOA() dns.RR {
	rr, _ := dns.NewRR("gslb.example.com. 300 IN SOA ns1.gslb.example.com. hostmaster.gslb.example.com. 1 7200 1800 86400 60")
	return rr
}

// FuzzParsePeerAnswer feeds arbitrary packets as peer answers: they may be
// rejected, never crash, and never yield more than maxTargets targets.
func FuzzParsePeerAnswer(f *testing.F) {
	q := new(dns.Msg)
	q.SetQuestion("localtargets-app.gslb.example.com.", dns.TypeA)
	r := new(dns.Msg)
	r.SetReply(q)
	r.Answer = []dns.RR{&dns.A{Hdr: dns.RR_Header{Name: q.Question[0].Name, Rrtype: dns.TypeA, Class: dns.ClassINET, Ttl: 30}, A: []byte{10, 0, 0, 1}}}
	good, _ := r.Pack()
	f.Add(good)
	f.Add([]byte{0, 0, 0x81, 0x80, 0, 1, 0, 0, 0, 0, 0, 0})
	f.Fuzz(func(t *testing.T, b []byte) {
		m := new(dns.Msg)
		if err := m.Unpack(b); err != nil {
			return
		}
		m.Id = q.Id
		pa, err := parsePeerAnswer(q, m)
		if err == nil && len(pa.addrs) > maxTargets {
			t.Fatalf("%d targets kept", len(pa.addrs))
		}
	})
}
