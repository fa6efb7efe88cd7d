package k8scrd

import (
	"context"
	"testing"

	"github.com/coredns/coredns/plugin/pkg/dnstest"
	"github.com/coredns/coredns/request"
	"github.com/miekg/dns"
)

// askVia asks k as a server would, through CoreDNS's ScrubWriter, over w
// (UDP or TCP), with the options set on the query by opts.
func askVia(t testing.TB, k *K8sCRD, qname string, qtype uint16, w dns.ResponseWriter, opts ...func(*dns.Msg)) *dns.Msg {
	t.Helper()
	m := new(dns.Msg)
	m.SetQuestion(qname, qtype)
	for _, o := range opts {
		o(m)
	}
	rec := dnstest.NewRecorder(w)
	if _, err := k.ServeDNS(context.Background(), request.NewScrubWriter(m, rec), m); err != nil {
		t.Fatalf("%s %s: %v", qname, dns.TypeToString[qtype], err)
	}
	if rec.Msg == nil {
		return nil
	}
	return rec.Msg.Copy()
}
