package hostile_test

import (
	"bufio"
	"fmt"
	"net"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/fleetdns/fleetdns/test/harness"
	"github.com/miekg/dns"
)

// metric returns the sum of the samples of name (any labels matching
// every labels pair) at the prometheus endpoint hostport.
func metric(t testing.TB, hostport, name string, labels ...string) float64 {
	t.Helper()
	cl := http.Client{Timeout: 10 * time.Second}
	resp, err := cl.Get("http://" + hostport + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	sum := 0.0
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		if !strings.HasPrefix(line, name+"{") && !strings.HasPrefix(line, name+" ") {
			continue
		}
		ok := true
		for i := 0; i+1 < len(labels); i += 2 {
			if !strings.Contains(line, labels[i]+`="`+labels[i+1]+`"`) {
				ok = false
			}
		}
		if !ok {
			continue
		}
		f := strings.Fields(line)
		v, err := strconv.ParseFloat(f[len(f)-1], 64)
		if err == nil {
			sum += v
		}
	}
	return sum
}

// listenDNS serves h on ip, UDP and TCP on one free port, until the test ends.
func listenDNS(t testing.TB, ip string, h dns.Handler) string {
	t.Helper()
	addr := harness.HostPort(t, ip)
	pc, err := net.ListenPacket("udp", addr)
	if err != nil {
		t.Fatal(err)
	}
	l, err := net.Listen("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range []*dns.Server{{PacketConn: pc, Handler: h}, {Listener: l, Handler: h}} {
		started := make(chan struct{})
		s.NotifyStartedFunc = func() { close(started) }
		go s.ActivateAndServe()
		<-started
		t.Cleanup(func() { s.Shutdown() })
	}
	return addr
}

// ownDNS is a tenant's own DNS, the resolver k8scrd is told to ask: every
// name under evil is an alias of pool, which has `records` A records
// (198.18.0.0 upwards); any other name answers the addresses of answers.
type ownDNS struct {
	evil    string
	pool    []dns.RR
	mu      sync.Mutex
	answers map[string]string
}

func newOwnDNS(evil string, records int) *ownDNS {
	o := &ownDNS{evil: dns.Fqdn(evil), answers: map[string]string{}}
	pool := "pool." + o.evil
	for i := range records {
		o.pool = append(o.pool, &dns.A{
			Hdr: dns.RR_Header{Name: pool, Rrtype: dns.TypeA, Class: dns.ClassINET, Ttl: 300},
			A:   net.IPv4(198, 18, byte(i>>8), byte(i)).To4(),
		})
	}
	return o
}

func (o *ownDNS) set(name, addr string) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.answers[dns.CanonicalName(name)] = addr
}

func (o *ownDNS) ServeDNS(w dns.ResponseWriter, r *dns.Msg) {
	m := new(dns.Msg)
	m.SetReply(r)
	m.RecursionAvailable = true
	m.Compress = true
	q := r.Question[0]
	name := dns.CanonicalName(q.Name)
	o.mu.Lock()
	addr, known := o.answers[name]
	o.mu.Unlock()
	switch {
	case known && q.Qtype == dns.TypeA:
		m.Answer = []dns.RR{&dns.A{Hdr: dns.RR_Header{Name: q.Name, Rrtype: dns.TypeA, Class: dns.ClassINET, Ttl: 300}, A: net.ParseIP(addr).To4()}}
	case dns.IsSubDomain(o.evil, name) && q.Qtype == dns.TypeA:
		m.Answer = append([]dns.RR{&dns.CNAME{Hdr: dns.RR_Header{Name: q.Name, Rrtype: dns.TypeCNAME, Class: dns.ClassINET, Ttl: 300}, Target: "pool." + o.evil}}, o.pool...)
	case known || dns.IsSubDomain(o.evil, name):
		m.Ns = []dns.RR{&dns.SOA{Hdr: dns.RR_Header{Name: o.evil, Rrtype: dns.TypeSOA, Class: dns.ClassINET, Ttl: 300}, Ns: "ns." + o.evil, Mbox: "h." + o.evil, Serial: 1, Minttl: 300}}
	default:
		m.Rcode = dns.RcodeRefused
	}
	if w.LocalAddr().Network() == "udp" {
		size := dns.MinMsgSize
		if opt := r.IsEdns0(); opt != nil {
			size = int(opt.UDPSize())
		}
		m.Truncate(size)
	}
	w.WriteMsg(m)
}

// heapInuse is the coredns process's go_memstats_heap_inuse_bytes, read
// from its /metrics: the heap as the process reports it, from outside.
func heapInuse(t testing.TB, metrics string) float64 {
	return metric(t, metrics, "go_memstats_heap_inuse_bytes")
}

// memory is a server's heap in use (from its metrics) and its VmRSS.
func memory(t testing.TB, metrics string, cd *harness.CoreDNS) (heap, rss float64) {
	t.Helper()
	r, err := cd.RSS()
	if err != nil {
		t.Fatal(err)
	}
	return heapInuse(t, metrics), float64(r)
}

const mib = 1 << 20

func fmtMiB(b float64) string { return fmt.Sprintf("%.1f MiB", b/mib) }
