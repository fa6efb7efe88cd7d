package k8scrd

import (
	"net"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/coredns/coredns/core/dnsserver"
	ctest "github.com/coredns/coredns/test"
	"github.com/fleetdns/fleetdns/internal/testkit"
	"github.com/miekg/dns"
)

// startServer runs a real CoreDNS server in-process from a Corefile, with
// k8scrd in its plugin.cfg place (before file).
func startServer(t *testing.T, corefile string) (udp, tcp string) {
	t.Helper()
	if !slices.Contains(dnsserver.Directives, "k8scrd") {
		i := slices.Index(dnsserver.Directives, "file")
		dnsserver.Directives = slices.Insert(dnsserver.Directives, i, "k8scrd")
	}
	inst, udp, tcp, err := ctest.CoreDNSServerAndPorts(corefile)
	if err != nil {
		t.Fatalf("starting CoreDNS: %v", err)
	}
	t.Cleanup(func() { inst.Stop() })
	return udp, tcp
}

func TestServerTransferAndNotifyOverSockets(t *testing.T) {
	dir := t.TempDir()
	write(t, filepath.Join(dir, "a.yaml"), testkit.DNSEndpoint("ns", "a", nil, testkit.EP("www.example.org", "A", 0, "192.0.2.1")))

	// A secondary's NOTIFY listener.
	pc, err := net.ListenPacket("udp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer pc.Close()
	notifies := make(chan *dns.Msg, 16)
	go func() {
		buf := make([]byte, 1500)
		for {
			n, from, err := pc.ReadFrom(buf)
			if err != nil {
				return
			}
			m := new(dns.Msg)
			if m.Unpack(buf[:n]) == nil && m.Opcode == dns.OpcodeNotify {
				notifies <- m
				r := new(dns.Msg)
				r.SetReply(m)
				b, _ := r.Pack()
				pc.WriteTo(b, from)
			}
		}
	}()

	udp, tcp := startServer(t, `example.org:0 {
		bind 127.0.0.1
		k8scrd {
			directory `+dir+`
		}
		transfer {
			to `+pc.LocalAddr().String()+`
		}
	}`)

	c := new(dns.Client)
	m := new(dns.Msg)
	m.SetQuestion("www.example.org.", dns.TypeA)
	r, _, err := c.Exchange(m, udp)
	if err != nil || len(r.Answer) != 1 || !r.Authoritative {
		t.Fatalf("query over UDP: %v\n%v", err, r)
	}

	// AXFR over TCP through the stock transfer plugin.
	tr := new(dns.Transfer)
	ax := new(dns.Msg)
	ax.SetAxfr("example.org.")
	env, err := tr.In(ax, tcp)
	if err != nil {
		t.Fatal(err)
	}
	var rrs []dns.RR
	for e := range env {
		if e.Error != nil {
			t.Fatal(e.Error)
		}
		rrs = append(rrs, e.RR...)
	}
	if len(rrs) != 4 || rrs[0].Header().Rrtype != dns.TypeSOA || rrs[3].Header().Rrtype != dns.TypeSOA {
		t.Errorf("AXFR: want SOA, NS, A, SOA; got %v", rrs)
	}

	// A change notifies the secondary.
	write(t, filepath.Join(dir, "a.yaml"), testkit.DNSEndpoint("ns", "a", nil, testkit.EP("www.example.org", "A", 0, "192.0.2.2")))
	select {
	case n := <-notifies:
		if n.Question[0].Name != "example.org." || n.Question[0].Qtype != dns.TypeSOA {
			t.Errorf("NOTIFY for %v", n.Question[0])
		}
	case <-time.After(5 * time.Second):
		t.Error("no NOTIFY after a change")
	}
}
