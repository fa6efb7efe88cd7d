package main

import (
	"bufio"
	"fmt"
	"net"
	"os"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/miekg/dns"
)

// query is one line of a dnsperf query file: a name and a type; do sets
// the DNSSEC OK bit (EDNS0, 1232 octets), as a validating resolver asks.
type query struct {
	name, qtype string
	do          bool
}

// readQueries reads the first n queries of a dnsperf-format file.
func readQueries(path string, n int) ([]query, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	var qs []query
	sc := bufio.NewScanner(f)
	for sc.Scan() && len(qs) < n {
		fs := strings.Fields(sc.Text())
		if len(fs) != 2 {
			continue
		}
		qs = append(qs, query{fs[0], fs[1], false})
	}
	if len(qs) < n {
		return nil, fmt.Errorf("%s: %d queries, want %d", path, len(qs), n)
	}
	return qs, sc.Err()
}

// checker says what is wrong with a reply to q, nil when it is right.
type checker func(q query, m *dns.Msg) error

// want is a checker for a fixed rcode and answer (records as "TYPE rdata",
// compared as a set, see answerOf).
func want(rcode string, answer []string) func(*dns.Msg) error {
	exp := normalize(answer)
	return func(m *dns.Msg) error {
		got := answerOf(m)
		if dns.RcodeToString[m.Rcode] != rcode || !slices.Equal(got, exp) {
			return fmt.Errorf("got %s %v, want %s %v", dns.RcodeToString[m.Rcode], got, rcode, exp)
		}
		return nil
	}
}

// answerOf is the reply's answer section as sorted "TYPE rdata" strings:
// addresses in their canonical text, names lower case.
func answerOf(m *dns.Msg) []string {
	var out []string
	for _, rr := range m.Answer {
		var rdata string
		switch v := rr.(type) {
		case *dns.A:
			rdata = v.A.String()
		case *dns.AAAA:
			rdata = v.AAAA.String()
		case *dns.CNAME:
			rdata = strings.ToLower(v.Target)
		default:
			rdata = strings.TrimPrefix(rr.String(), rr.Header().String())
		}
		out = append(out, dns.TypeToString[rr.Header().Rrtype]+" "+rdata)
	}
	slices.Sort(out)
	return out
}

// normalize puts expected records in answerOf's form.
func normalize(rrs []string) []string {
	out := make([]string, 0, len(rrs))
	for _, r := range rrs {
		typ, rdata, _ := strings.Cut(r, " ")
		if ip := net.ParseIP(rdata); ip != nil && (typ == "A" || typ == "AAAA") {
			rdata = ip.String()
		}
		out = append(out, typ+" "+rdata)
	}
	slices.Sort(out)
	return out
}

// sendResult is what one batch of queries got.
type sendResult struct {
	sent, wrong, lost int
	unsettled         int // queries sent before the server was seen asleep
	firstErr          error
	elapsed           time.Duration
}

func (r sendResult) ok() bool { return r.sent > 0 && r.wrong == 0 && r.lost == 0 }

func (r sendResult) String() string {
	s := fmt.Sprintf("%d queries in %v, %d wrong, %d lost", r.sent, r.elapsed.Round(time.Millisecond), r.wrong, r.lost)
	if r.firstErr != nil {
		s += "; first: " + r.firstErr.Error()
	}
	return s
}

// send asks addr every query over UDP from `clients` goroutines, each with
// one socket and one query outstanding, and checks every reply. It stops
// early when the deadline passes (the remaining queries count as lost).
// With settlePID set, each query waits until that process sleeps (settle).
func send(addr string, qs []query, clients int, timeout time.Duration, deadline time.Time, check checker, settlePID int) sendResult {
	start := time.Now()
	var mu sync.Mutex
	res := sendResult{sent: len(qs)}
	fail := func(lost bool, err error) {
		mu.Lock()
		defer mu.Unlock()
		if lost {
			res.lost++
		} else {
			res.wrong++
		}
		if res.firstErr == nil {
			res.firstErr = err
		}
	}
	var wg sync.WaitGroup
	for w := range clients {
		wg.Add(1)
		go func() {
			defer wg.Done()
			c := &dns.Client{Net: "udp", Timeout: timeout}
			var conn *dns.Conn
			for i := w; i < len(qs); i += clients {
				q := qs[i]
				if time.Now().After(deadline) {
					fail(true, fmt.Errorf("%s %s: window deadline passed", q.name, q.qtype))
					continue
				}
				if conn == nil {
					var err error
					if conn, err = c.Dial(addr); err != nil {
						fail(true, err)
						continue
					}
				}
				if settlePID > 0 && !settle(settlePID, time.Second) {
					mu.Lock()
					res.unsettled++
					mu.Unlock()
				}
				m := new(dns.Msg)
				m.SetQuestion(q.name, dns.StringToType[q.qtype])
				if q.do {
					m.SetEdns0(1232, true)
				}
				r, _, err := c.ExchangeWithConn(m, conn)
				if err != nil {
					// A late reply must not be read as the next query's.
					conn.Close()
					conn = nil
					fail(true, fmt.Errorf("%s %s: %v", q.name, q.qtype, err))
					continue
				}
				if err := check(q, r); err != nil {
					fail(false, fmt.Errorf("%s %s: %v", q.name, q.qtype, err))
				}
			}
			if conn != nil {
				conn.Close()
			}
		}()
	}
	wg.Wait()
	res.elapsed = time.Since(start)
	return res
}
