// Package reliability holds fleetdns' fault and bad-input tests: the built
// coredns binary (test/harness) against clients that send anything, peers
// and upstreams that misbehave on purpose, manifests caught half-written,
// Corefile reloads under load, the API server and etcd killed under queries,
// and the soak (TestSoak, run by `make soak`, skipped otherwise).
// Heavy tests are skipped under -short.
package reliability

import (
	"net"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/miekg/dns"
)

// addrsOf returns the sorted A/AAAA targets of a reply.
func addrsOf(m *dns.Msg) []string {
	var out []string
	for _, rr := range m.Answer {
		switch x := rr.(type) {
		case *dns.A:
			out = append(out, x.A.String())
		case *dns.AAAA:
			out = append(out, x.AAAA.String())
		}
	}
	slices.Sort(out)
	return out
}

// summary renders a reply as "RCODE [targets]" for messages.
func summary(m *dns.Msg, err error) string {
	if err != nil {
		return "error: " + err.Error()
	}
	return dns.RcodeToString[m.Rcode] + " " + strings.Join(addrsOf(m), ",")
}

// load sends queries from workers goroutines until stopped, each answer
// judged by check ("" = right); it counts and keeps the first wrong ones.
type load struct {
	mu     sync.Mutex
	total  int
	wrong  int
	errs   int
	first  []string
	stop   chan struct{}
	done   sync.WaitGroup
	maxLat time.Duration
}

func startLoad(addr string, workers int, pause time.Duration, names []string, qtype uint16, check func(name string, m *dns.Msg) string) *load {
	l := &load{stop: make(chan struct{})}
	for w := range workers {
		l.done.Add(1)
		go func() {
			defer l.done.Done()
			c := dns.Client{Net: "udp", Timeout: 2 * time.Second}
			for i := w; ; i++ {
				select {
				case <-l.stop:
					return
				default:
				}
				name := names[i%len(names)]
				q := new(dns.Msg)
				q.SetQuestion(name, qtype)
				start := time.Now()
				r, _, err := c.Exchange(q, addr)
				lat := time.Since(start)
				bad := ""
				if err != nil {
					bad = "error: " + err.Error()
				} else {
					bad = check(name, r)
				}
				l.mu.Lock()
				l.total++
				l.maxLat = max(l.maxLat, lat)
				if err != nil {
					l.errs++
				}
				if bad != "" {
					l.wrong++
					if len(l.first) < 10 {
						l.first = append(l.first, time.Now().Format("15:04:05.000")+" "+name+": "+bad)
					}
				}
				l.mu.Unlock()
				if pause > 0 {
					time.Sleep(pause)
				}
			}
		}()
	}
	return l
}

// end stops the load and returns totals.
func (l *load) end() (total, wrong int, first []string) {
	close(l.stop)
	l.done.Wait()
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.total, l.wrong, l.first
}

// udpListen binds UDP on ip:port (port 53 when 0 is not wanted).
func udpListen(t testing.TB, addr string) net.PacketConn {
	t.Helper()
	pc, err := net.ListenPacket("udp", addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { pc.Close() })
	return pc
}
