package gslb

import (
	"fmt"
	"net"
	"testing"
	"time"

	"github.com/fleetdns/fleetdns/internal/testkit"
	"github.com/fleetdns/fleetdns/test/harness"

	"github.com/miekg/dns"
)

// TestStrategiesFromEveryCluster starts three clusters that find each other
// through the parent's NS delegation, and asks every cluster for every
// strategy's host: the answer is the same wherever a client asks.
func TestStrategiesFromEveryCluster(t *testing.T) {
	f := newFleet(t)
	// A client address that `geo cidr` maps to ap: geoip without ECS goes by
	// the source address.
	clientIP := harness.NewIP(t)
	writeK8gbObjects(t, f)
	f.start(t, fleetOptions{gslbExtra: map[string]string{"": fmt.Sprintf("        geo cidr %s/32 ap\n", clientIP)}})

	for _, tag := range tags {
		c := f.clusters[tag]
		t.Run("from "+tag, func(t *testing.T) {
			t.Run("localtargets is this cluster's own targets", func(t *testing.T) {
				got, err := ask(c.addr, "localtargets-"+hostRR, dns.TypeA)
				if err != nil || !equal(got, sorted(targetsOf[tag])) {
					t.Errorf("localtargets-%s A = %v (%v), want %v", hostRR, got, err, targetsOf[tag])
				}
			})
			t.Run("failover answers the first primary", func(t *testing.T) {
				got, err := ask(c.addr, hostFailover, dns.TypeA)
				if err != nil || !equal(got, f.union("eu")) {
					t.Errorf("%s A = %v (%v), want eu's %v", hostFailover, got, err, f.union("eu"))
				}
			})
			t.Run("roundRobin answers every cluster's targets", func(t *testing.T) {
				for _, name := range []string{hostRR, hostDefault} {
					got, err := ask(c.addr, name, dns.TypeA)
					if want := f.union(tags...); err != nil || !equal(got, want) {
						t.Errorf("%s A = %v (%v), want %v", name, got, err, want)
					}
				}
			})
			t.Run("weighted draws one tag, never weight 0", func(t *testing.T) {
				seen := map[string]int{}
				for range 60 {
					got, err := ask(c.addr, hostWeighted, dns.TypeA)
					if err != nil {
						t.Fatal(err)
					}
					switch {
					case equal(got, f.union("us")):
						seen["us"]++
					case equal(got, f.union("ap")):
						seen["ap"]++
					default:
						t.Fatalf("%s A = %v: not exactly one of us %v or ap %v (eu has weight 0)", hostWeighted, got, f.union("us"), f.union("ap"))
					}
				}
				// us=1, ap=1: 60 draws miss one side with probability 2^-59.
				if seen["us"] == 0 || seen["ap"] == 0 {
					t.Errorf("weighted draws %v: want both us and ap", seen)
				}
			})
			t.Run("geoip by client subnet", func(t *testing.T) {
				for _, want := range tags {
					m, err := harness.Ask(c.addr, hostGeo, dns.TypeA, harness.ECS(subnetIn(want)))
					if err != nil {
						t.Fatal(err)
					}
					if got := harness.Targets(m, dns.TypeA); !equal(got, f.union(want)) {
						t.Errorf("ECS %s: %v, want %s's %v", subnetIn(want), got, want, f.union(want))
					}
					// RFC 7871 §7.2.1: scope is the matched CIDR's prefix.
					if ecs := replyECS(m); ecs == nil || ecs.SourceScope != 16 || ecs.SourceNetmask != 24 {
						t.Errorf("ECS %s: reply ECS %v, want source /24 scope /16", subnetIn(want), ecs)
					}
				}
				m, err := harness.Ask(c.addr, hostGeo, dns.TypeA, harness.ECS("192.0.2.0/24"))
				if err != nil {
					t.Fatal(err)
				}
				if got := harness.Targets(m, dns.TypeA); !equal(got, f.union(tags...)) {
					t.Errorf("unmapped ECS 192.0.2.0/24: %v, want every target %v", got, f.union(tags...))
				}
			})
			t.Run("geoip by source address without ECS", func(t *testing.T) {
				got, err := askFrom(clientIP, c.addr, hostGeo, dns.TypeA)
				if err != nil || !equal(got, f.union("ap")) {
					t.Errorf("from %s (mapped to ap): %v (%v), want %v", clientIP, got, err, f.union("ap"))
				}
			})
			t.Run("malformed ECS is FORMERR", func(t *testing.T) {
				m, q := harness.NewMsg(hostGeo, dns.TypeA, harness.EDNS(1232))
				// Family 1 (IPv4) with a source prefix of 40, longer than the
				// address (RFC 7871 §7.1.1); raw, as miekg/dns will not pack it.
				m.IsEdns0().Option = []dns.EDNS0{&dns.EDNS0_LOCAL{Code: dns.EDNS0SUBNET, Data: []byte{0, 1, 40, 0, 10, 1, 2, 0, 0}}}
				r, err := harness.AskMsg(c.addr, m, q)
				if err != nil {
					t.Fatal(err)
				}
				if r.Rcode != dns.RcodeFormatError {
					t.Errorf("ECS /40 for IPv4: %s, want FORMERR", dns.RcodeToString[r.Rcode])
				}
			})
			t.Run("the same answer over TCP", func(t *testing.T) {
				m, err := harness.Ask(c.addr, hostRR, dns.TypeA, harness.TCP)
				if err != nil {
					t.Fatal(err)
				}
				if got := harness.Targets(m, dns.TypeA); !equal(got, f.union(tags...)) {
					t.Errorf("%s A over TCP = %v, want %v", hostRR, got, f.union(tags...))
				}
			})
			t.Run("no ECS in the reply when the query had none", func(t *testing.T) {
				m, err := harness.Ask(c.addr, hostGeo, dns.TypeA, harness.EDNS(1232))
				if err != nil {
					t.Fatal(err)
				}
				if ecs := replyECS(m); ecs != nil {
					t.Errorf("reply carries ECS %v to a query without it", ecs)
				}
			})
			t.Run("ECS scope 0 when the answer did not depend on the client", func(t *testing.T) {
				m, err := harness.Ask(c.addr, hostRR, dns.TypeA, harness.ECS(subnetIn("eu")))
				if err != nil {
					t.Fatal(err)
				}
				if ecs := replyECS(m); ecs == nil || ecs.SourceScope != 0 {
					t.Errorf("roundRobin reply ECS %v, want echoed with scope 0", ecs)
				}
			})
			t.Run("each family from the first primary that has it", func(t *testing.T) {
				// primary us,eu,ap: us has A only, so A is us's; AAAA is
				// eu's, the first primary with AAAA, not NODATA.
				got, err := ask(c.addr, hostDual, dns.TypeA)
				if err != nil || !equal(got, f.union("us")) {
					t.Errorf("%s A = %v (%v), want us's %v", hostDual, got, err, f.union("us"))
				}
				got, err = ask(c.addr, hostDual, dns.TypeAAAA)
				if err != nil || !equal(got, v6Of["eu"]) {
					t.Errorf("%s AAAA = %v (%v), want eu's %v (us has no AAAA)", hostDual, got, err, v6Of["eu"])
				}
			})
			t.Run("objects written by the k8gb operator are served as written", func(t *testing.T) {
				if tag == "ap" {
					return // ap has none
				}
				want := k8gbAnswer[tag]
				if got, err := ask(c.addr, hostK8gb, dns.TypeA); err != nil || !equal(got, want) {
					t.Errorf("%s A = %v (%v), want the operator's answer %v, not re-assembled", hostK8gb, got, err, want)
				}
				want = k8gbLocal[tag]
				if got, err := ask(c.addr, "localtargets-"+hostK8gb, dns.TypeA); err != nil || !equal(got, want) {
					t.Errorf("localtargets-%s A = %v (%v), want the operator's record %v", hostK8gb, got, err, want)
				}
			})
			t.Run("answer TTLs: gslb/ttl, else recordTTL, else ttl", func(t *testing.T) {
				for _, tc := range []struct {
					name string
					ttl  uint32
				}{
					{hostWeighted, 11}, {hostRR, 7}, {hostDefault, 5},
					{"localtargets-" + hostRR, 7},       // the endpoint's TTL
					{"localtargets-" + hostDefault, 30}, // localtargets' default, as k8scrd's
				} {
					m := harness.Exchange(t, c.addr, tc.name, dns.TypeA)
					if len(m.Answer) == 0 {
						t.Errorf("%s: no answer", tc.name)
						continue
					}
					for _, rr := range m.Answer {
						if rr.Header().Ttl != tc.ttl {
							t.Errorf("%s: TTL %d, want %d", tc.name, rr.Header().Ttl, tc.ttl)
							break
						}
					}
				}
			})
			t.Run("AAAA from every cluster that has it", func(t *testing.T) {
				want := sorted(append(append([]string(nil), v6Of["eu"]...), v6Of["ap"]...))
				m := harness.Exchange(t, c.addr, hostDualRR, dns.TypeAAAA)
				if got := harness.Targets(m, dns.TypeAAAA); !equal(got, want) {
					t.Errorf("%s AAAA = %v, want %v", hostDualRR, got, want)
				}
				m = harness.Exchange(t, c.addr, "localtargets-"+hostDualRR, dns.TypeAAAA)
				if got := harness.Targets(m, dns.TypeAAAA); !equal(got, sorted(v6Of[tag])) || m.Rcode != dns.RcodeSuccess {
					t.Errorf("localtargets-%s AAAA = %s %v, want %v", hostDualRR, dns.RcodeToString[m.Rcode], got, v6Of[tag])
				}
			})
			t.Run("other types and names fall through to k8scrd", func(t *testing.T) {
				m, err := harness.Ask(c.addr, hostRR, dns.TypeTXT)
				if err != nil {
					t.Fatal(err)
				}
				if m.Rcode != dns.RcodeSuccess || len(m.Answer) != 0 || !m.Authoritative || !hasSOA(m.Ns) {
					t.Errorf("%s TXT: %s AA=%v answer %v ns %v, want authoritative NODATA with SOA",
						hostRR, dns.RcodeToString[m.Rcode], m.Authoritative, m.Answer, m.Ns)
				}
				m, err = harness.Ask(c.addr, "nothere."+zone, dns.TypeA)
				if err != nil {
					t.Fatal(err)
				}
				if m.Rcode != dns.RcodeNameError || !hasSOA(m.Ns) {
					t.Errorf("undeclared name: %s, want NXDOMAIN with SOA", dns.RcodeToString[m.Rcode])
				}
			})
		})
	}
}

// subnetIn is a /24 inside the subnet `geo cidr` maps to tag.
func subnetIn(tag string) string {
	return map[string]string{"eu": "10.1.2.0/24", "us": "10.2.2.0/24", "ap": "10.3.2.0/24"}[tag]
}

func replyECS(m *dns.Msg) *dns.EDNS0_SUBNET {
	opt := m.IsEdns0()
	if opt == nil {
		return nil
	}
	for _, o := range opt.Option {
		if e, ok := o.(*dns.EDNS0_SUBNET); ok {
			return e
		}
	}
	return nil
}

func hasSOA(rrs []dns.RR) bool {
	for _, rr := range rrs {
		if rr.Header().Rrtype == dns.TypeSOA {
			return true
		}
	}
	return false
}

// askFrom queries addr from the local address src (a loopback address the
// test owns), as a client at src would.
func askFrom(src, addr, name string, qtype uint16) ([]string, error) {
	m := new(dns.Msg)
	m.SetQuestion(dns.Fqdn(name), qtype)
	r, err := exchangeFrom(src, addr, m)
	if err != nil {
		return nil, err
	}
	if r.Rcode != dns.RcodeSuccess {
		return nil, fmt.Errorf("rcode %s", dns.RcodeToString[r.Rcode])
	}
	return harness.Targets(r, qtype), nil
}

func exchangeFrom(src, addr string, m *dns.Msg) (*dns.Msg, error) {
	cl := dns.Client{Net: "udp", Timeout: 2 * time.Second,
		Dialer: &net.Dialer{Timeout: 2 * time.Second, LocalAddr: &net.UDPAddr{IP: net.ParseIP(src)}}}
	r, _, err := cl.Exchange(m, addr)
	return r, err
}

// The k8gb operator's objects for one host in eu and us: each cluster's
// localtargets- record and the answer the operator assembled (eu's is
// stale: it does not know us's target yet). Served as written, eu's answer
// never gains us's target.
const hostK8gb = "k8gb." + zone

var (
	k8gbLocal  = map[string][]string{"eu": {"10.99.0.1"}, "us": {"10.97.0.1"}}
	k8gbAnswer = map[string][]string{"eu": {"10.98.0.1", "10.99.0.1"}, "us": {"10.97.0.1", "10.98.0.1", "10.99.0.1"}}
)

func writeK8gbObjects(t *testing.T, f *fleet) {
	for _, tag := range []string{"eu", "us"} {
		// The legacy label in us, the current one in eu.
		label := map[string]string{"eu": "k8gb.io/dnstype", "us": "k8gb.absa.oss/dnstype"}[tag]
		testkit.WriteFile(t, f.clusters[tag].dir, "k8gb.yaml", testkit.DNSEndpoint("k8gb", "k8gb-app", map[string]string{label: "local"},
			testkit.Endpoint{DNSName: "localtargets-" + hostK8gb, RecordType: "A", TTL: 30, Targets: k8gbLocal[tag],
				Labels: map[string]string{"strategy": "roundRobin"}},
			testkit.Endpoint{DNSName: hostK8gb, RecordType: "A", TTL: 30, Targets: k8gbAnswer[tag],
				Labels: map[string]string{"strategy": "roundRobin"}},
		))
	}
}
