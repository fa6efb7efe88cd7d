package main

import (
	"testing"

	"github.com/miekg/dns"
)

func reply(rcode int, rrs ...string) *dns.Msg {
	m := new(dns.Msg)
	m.Rcode = rcode
	for _, s := range rrs {
		rr, err := dns.NewRR(s)
		if err != nil {
			panic(err)
		}
		m.Answer = append(m.Answer, rr)
	}
	return m
}

// The checks that keep a broken server from looking cheap: rcode and the
// answer records must both match, in any order, addresses compared as
// addresses (benchkit writes fd00::0:8, a server fd00::8).
func TestWant(t *testing.T) {
	chain := want("NOERROR", []string{"CNAME host-20.example.bench.", "A 10.0.0.20"})
	for _, tc := range []struct {
		name  string
		check func(*dns.Msg) error
		m     *dns.Msg
		ok    bool
	}{
		{"chain", chain, reply(dns.RcodeSuccess, "host-20.example.bench. 30 IN A 10.0.0.20", "alias-20.example.bench. 30 IN CNAME HOST-20.example.bench."), true},
		{"chain without its A", chain, reply(dns.RcodeSuccess, "alias-20.example.bench. 30 IN CNAME host-20.example.bench."), false},
		{"another address", chain, reply(dns.RcodeSuccess, "alias-20.example.bench. 30 IN CNAME host-20.example.bench.", "host-20.example.bench. 30 IN A 10.0.0.21"), false},
		{"AAAA in canonical form", want("NOERROR", []string{"AAAA fd00::0:8"}), reply(dns.RcodeSuccess, "host-8.example.bench. 30 IN AAAA fd00::8"), true},
		{"NODATA", want("NOERROR", nil), reply(dns.RcodeSuccess), true},
		{"NXDOMAIN for NODATA", want("NOERROR", nil), reply(dns.RcodeNameError), false},
		{"SERVFAIL for NXDOMAIN", want("NXDOMAIN", nil), reply(dns.RcodeServerFailure), false},
		{"an answer too many", want("NOERROR", []string{"A 192.0.2.1"}), reply(dns.RcodeSuccess, "x. 5 IN A 192.0.2.1", "x. 5 IN A 192.0.2.1"), false},
	} {
		err := tc.check(tc.m)
		if (err == nil) != tc.ok {
			t.Errorf("%s: got %v, want ok=%v", tc.name, err, tc.ok)
		}
	}
}
