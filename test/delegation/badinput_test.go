package delegation

import (
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/fleetdns/fleetdns/internal/testkit"
	"github.com/fleetdns/fleetdns/test/harness"

	"github.com/miekg/dns"
)

// startBrokenParent serves example.com's SOA (and NXDOMAIN for the rest) so
// that a cluster's check finds the parent zone, and answers every UPDATE with
// reply. It counts the UPDATEs.
func startBrokenParent(t *testing.T, reply func(w dns.ResponseWriter, r *dns.Msg)) (string, *atomic.Int64) {
	t.Helper()
	ip := harness.NewIP(t)
	pc, err := net.ListenPacket("udp", net.JoinHostPort(ip, "53"))
	if err != nil {
		t.Fatal(err)
	}
	var n atomic.Int64
	soa, _ := dns.NewRR("example.com. 300 IN SOA ns.example.com. hostmaster.example.com. 1 3600 600 86400 60")
	// miekg/dns answers UPDATE NOTIMP unless told to take it.
	accept := func(dns.Header) dns.MsgAcceptAction { return dns.MsgAccept }
	srv := &dns.Server{PacketConn: pc, MsgAcceptFunc: accept, Handler: dns.HandlerFunc(func(w dns.ResponseWriter, r *dns.Msg) {
		if r.Opcode == dns.OpcodeUpdate {
			n.Add(1)
			reply(w, r)
			return
		}
		m := new(dns.Msg)
		m.SetReply(r)
		m.Authoritative = true
		if q := r.Question[0]; strings.EqualFold(q.Name, parent) && q.Qtype == dns.TypeSOA {
			m.Answer = []dns.RR{soa}
		} else {
			m.Rcode = dns.RcodeNameError
			m.Ns = []dns.RR{soa}
		}
		w.WriteMsg(m)
	})}
	go srv.ActivateAndServe()
	t.Cleanup(func() { srv.Shutdown() })
	return net.JoinHostPort(ip, "53"), &n
}

// TestParentAnsweringSERVFAILOrGarbage: an UPDATE answered SERVFAIL or with
// a datagram that is no DNS message is counted by result and logged once,
// the parent link is 0, and the cluster keeps answering.
func TestParentAnsweringSERVFAILOrGarbage(t *testing.T) {
	harness.RequirePlugins(t, "k8scrd", "localtargets", "gslb")
	for _, c := range []struct {
		name, result string
		reply        func(w dns.ResponseWriter, r *dns.Msg)
	}{
		{"servfail", "servfail", func(w dns.ResponseWriter, r *dns.Msg) {
			m := new(dns.Msg)
			m.SetRcode(r, dns.RcodeServerFailure)
			w.WriteMsg(m)
		}},
		{"garbage", "malformed", func(w dns.ResponseWriter, r *dns.Msg) {
			// The request's ID, then a header and question that do not
			// parse.
			w.Write([]byte{byte(r.Id >> 8), byte(r.Id), 0xa8, 0x00, 0x00, 0x01, 0xff, 0xff, 0x00, 0x00, 0x00, 0x00, 0x3f, 'x'})
		}},
	} {
		t.Run(c.name, func(t *testing.T) {
			addr, n := startBrokenParent(t, c.reply)
			key, _ := keyOf(t, "eu."+zone)
			cl := newCluster(t, "eu", key, 0)
			cl.start(t, addr, publishStanza(addr, key, cl.ip, ""))
			testkit.Eventually(t, settle, c.name, func() (bool, string) {
				v := updates(t, cl, c.result)
				return v >= 3, fmt.Sprintf("%s UPDATEs counted %v (the parent saw %d); log:\n%s", c.result, v, n.Load(), cl.srv.Log())
			})
			if v, ok := parentLink(t, cl); !ok || v != 0 {
				t.Errorf("coredns_gslb_parent_link = %v (present %v), want 0", v, ok)
			}
			if got := strings.Count(cl.srv.Log(), "did not apply the UPDATE"); got != 1 {
				t.Errorf("%d log lines for %d refused UPDATEs, want one:\n%s", got, n.Load(), cl.srv.Log())
			}
			r, err := harness.Ask(cl.ip+":53", host, dns.TypeA, harness.Timeout(time.Second))
			if err != nil || len(harness.Targets(r, dns.TypeA)) != 1 {
				t.Errorf("the cluster stopped answering %s: %v %v", host, r, err)
			}
		})
	}
}

// TestKeyFileThatDoesNotParseStopsStartUp: the error names the key file's
// line and the Corefile's.
func TestKeyFileThatDoesNotParseStopsStartUp(t *testing.T) {
	harness.RequirePlugins(t, "k8scrd", "localtargets", "gslb")
	key := filepath.Join(t.TempDir(), "eu.key")
	if err := os.WriteFile(key, []byte("key \"eu.gslb.example.com\" {\n\talgorithm hmac-sha256;\n\tsecret \"not base64!\";\n};\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	cl := newCluster(t, "eu", key, 0)
	srv := harness.StartCoreDNS(t, cl.corefile("127.0.0.1:53", publishStanza("127.0.0.1:53", key, cl.ip, "")), harness.WithoutWait())
	select {
	case <-srv.Exited():
	case <-time.After(10 * time.Second):
		t.Fatal("coredns with a key file that does not parse did not exit")
	}
	log := srv.Log()
	for _, want := range []string{key + ":3: key \"eu.gslb.example.com\": secret is not base64", "Corefile:8"} {
		if !strings.Contains(log, want) {
			t.Errorf("start-up error does not say %q:\n%s", want, log)
		}
	}
}
