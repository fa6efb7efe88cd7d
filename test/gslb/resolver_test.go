package gslb

import (
	"errors"
	"fmt"
	"net"
	"os/exec"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/fleetdns/fleetdns/internal/testkit"
	"github.com/fleetdns/fleetdns/test/harness"

	"github.com/miekg/dns"
)

// The ECS resolver tests: real ECS-caching resolvers (PowerDNS Recursor,
// Unbound with subnetcache) in front of the fleet, their clients on
// loopback source addresses, so the ECS option is the resolver's own, built
// from the client's address (/24). us's 127.0.32.0/23 holds ap's
// 127.0.33.0/24: us's answer must come with scope 24, or the resolver
// hands it to ap's clients from cache (RFC 7871 §7.2.1).
var (
	// resolverGeo are the `geo cidr` lines of every cluster.
	resolverGeo = "        geo cidr 127.0.32.0/23 us\n        geo cidr 127.0.33.0/24 ap\n        geo cidr 127.0.40.0/24 eu\n"
	// resolverClients are the source addresses of each region's client;
	// "none" is in no configured network and gets every target.
	resolverClients = []struct{ region, ip string }{
		{"us", "127.0.32.10"},
		{"ap", "127.0.33.10"},
		{"eu", "127.0.40.10"},
		{"none", "127.0.48.10"},
	}
	// resolverNeighbour is a second client in us's /24: it shares the
	// first us client's cache entry.
	resolverNeighbour = "127.0.32.99"
)

// geoOrders are every order of the four clients (4! = 24): one geoip host
// per order, so that each order starts with a cold cache entry.
func geoOrders() [][]int {
	var out [][]int
	var perm func(prefix []int, rest []int)
	perm = func(prefix, rest []int) {
		if len(rest) == 0 {
			out = append(out, append([]int(nil), prefix...))
			return
		}
		for i := range rest {
			next := append(append([]int(nil), rest[:i]...), rest[i+1:]...)
			perm(append(prefix, rest[i]), next)
		}
	}
	perm(nil, []int{0, 1, 2, 3})
	return out
}

func geoHost(i int) string { return fmt.Sprintf("ecs-%d.%s", i, zone) }

// hostCached is a roundRobin host: the same answer for everyone (scope 0).
const hostCached = "ecs-rr." + zone

// resolverHosts declares, in one cluster, a geoip host per order and the
// roundRobin host, with a TTL long enough to outlast the test.
func resolverHosts(tag string, own []string, orders int) string {
	var eps []testkit.Endpoint
	for i := range orders {
		eps = append(eps, testkit.Endpoint{DNSName: geoHost(i), RecordType: "A", TTL: 300, Targets: own,
			ProviderSpecific: [][2]string{{"gslb/strategy", "geoip"}}})
	}
	eps = append(eps, testkit.Endpoint{DNSName: hostCached, RecordType: "A", TTL: 300, Targets: own,
		ProviderSpecific: [][2]string{{"gslb/strategy", "roundRobin"}}})
	return testkit.DNSEndpoint("apps", "ecs-hosts", nil, eps...)
}

// upstream stands between the resolvers and eu: it forwards the GSLB
// zone to eu unchanged (the resolver's ECS option included), counts the
// queries per name and keeps the ECS sources and reply scopes it saw. For
// every other name it is the resolvers' root on loopback: it answers the
// priming query with itself as the only root server and everything else
// with an authoritative NXDOMAIN, so no resolver asks beyond loopback.
type upstream struct {
	ip, addr, to string
	mu           sync.Mutex
	count        map[string]int
	seen         map[string][]string // name -> "source/scope" of each forwarded query
}

func startUpstream(t *testing.T, to string) *upstream {
	t.Helper()
	u := &upstream{ip: harness.NewIP(t), to: to, count: map[string]int{}, seen: map[string][]string{}}
	u.addr = net.JoinHostPort(u.ip, "53")
	for _, network := range []string{"udp", "tcp"} {
		srv := &dns.Server{Addr: u.addr, Net: network, Handler: u}
		started := make(chan error, 1)
		srv.NotifyStartedFunc = func() { started <- nil }
		go func() { started <- srv.ListenAndServe() }()
		if err := <-started; err != nil {
			t.Fatalf("upstream %s %s: %v", network, u.addr, err)
		}
		t.Cleanup(func() { srv.Shutdown() })
	}
	return u
}

const rootNS = "a.root-servers.test."

func (u *upstream) ServeDNS(w dns.ResponseWriter, r *dns.Msg) {
	if len(r.Question) != 1 {
		return
	}
	q := r.Question[0]
	name := strings.ToLower(q.Name)
	if dns.IsSubDomain(zone+".", name) {
		cl := dns.Client{Net: "udp", Timeout: 2 * time.Second}
		if _, tcp := w.RemoteAddr().(*net.TCPAddr); tcp {
			cl.Net = "tcp"
		}
		resp, _, err := cl.Exchange(r, u.to)
		if err != nil {
			m := new(dns.Msg)
			m.SetRcode(r, dns.RcodeServerFailure)
			w.WriteMsg(m)
			return
		}
		u.mu.Lock()
		u.count[name]++
		u.seen[name] = append(u.seen[name], ecsString(r)+" scope "+scopeString(resp))
		u.mu.Unlock()
		w.WriteMsg(resp)
		return
	}
	m := new(dns.Msg)
	m.SetReply(r)
	m.Authoritative = true
	soa, _ := dns.NewRR(". 60 IN SOA " + rootNS + " hostmaster.test. 1 1800 900 604800 60")
	switch {
	case name == "." && q.Qtype == dns.TypeNS:
		ns, _ := dns.NewRR(". 3600 IN NS " + rootNS)
		glue, _ := dns.NewRR(rootNS + " 3600 IN A " + u.ip)
		m.Answer, m.Extra = []dns.RR{ns}, []dns.RR{glue}
	case name == strings.ToLower(rootNS) && q.Qtype == dns.TypeA:
		a, _ := dns.NewRR(rootNS + " 3600 IN A " + u.ip)
		m.Answer = []dns.RR{a}
	case name == "." || name == strings.ToLower(rootNS):
		m.Ns = []dns.RR{soa}
	default:
		m.Rcode = dns.RcodeNameError
		m.Ns = []dns.RR{soa}
	}
	w.WriteMsg(m)
}

func ecsString(m *dns.Msg) string {
	if o := m.IsEdns0(); o != nil {
		for _, opt := range o.Option {
			if e, ok := opt.(*dns.EDNS0_SUBNET); ok {
				return fmt.Sprintf("%s/%d", e.Address, e.SourceNetmask)
			}
		}
	}
	return "no ECS"
}

func scopeString(m *dns.Msg) string {
	if e := replyECS(m); e != nil {
		return fmt.Sprint(e.SourceScope)
	}
	return "-"
}

func (u *upstream) queries(name string) (int, []string) {
	u.mu.Lock()
	defer u.mu.Unlock()
	key := strings.ToLower(dns.Fqdn(name))
	return u.count[key], append([]string(nil), u.seen[key]...)
}

// hints is a root hints file naming the upstream as the only root.
func (u *upstream) hints(t *testing.T, dir string) string {
	return writeFile(t, dir, "root.hints", []byte(fmt.Sprintf(".\t3600000\tIN\tNS\t%s\n%s\t3600000\tIN\tA\t%s\n", rootNS, rootNS, u.ip)))
}

// startPDNSRecursor runs PowerDNS Recursor on a fresh loopback address:
// ECS for the GSLB zone (edns-subnet-allow-list) from every loopback client
// (ecs-add-for), /24 (ecs-ipv4-bits), the zone forwarded to the upstream,
// the upstream as the only root.
func startPDNSRecursor(t *testing.T, u *upstream) string {
	t.Helper()
	bin := harness.LookPath(t, "pdns_recursor")
	ip := harness.NewIP(t)
	dir := t.TempDir()
	conf := fmt.Sprintf(`local-address=%[1]s
local-port=53
allow-from=127.0.0.0/8
daemon=no
disable-syslog=yes
log-timestamp=no
loglevel=4
socket-dir=%[2]s
threads=1
hint-file=%[3]s
dont-query=
forward-zones=%[4]s=%[5]s
edns-subnet-allow-list=%[4]s,%[6]s/32
ecs-add-for=127.0.0.0/8
ecs-ipv4-bits=24
ecs-ipv4-cache-bits=24
`, ip, dir, u.hints(t, dir), zone, u.addr, u.ip)
	writeFile(t, dir, "recursor.conf", []byte(conf))
	p := harness.StartProcess(t, "pdns_recursor", bin, []string{"--config-dir=" + dir}, dir)
	return waitResolver(t, p, net.JoinHostPort(ip, "53"))
}

// startUnboundSubnet runs Unbound with the subnetcache module: ECS from the
// client's address (/24) to the upstream (send-client-subnet), the GSLB
// zone as a stub at the upstream, the upstream as the only root.
func startUnboundSubnet(t *testing.T, u *upstream) string {
	t.Helper()
	bin := harness.LookPath(t, "unbound")
	out, err := exec.Command(bin, "-V").CombinedOutput()
	if err != nil || !strings.Contains(string(out), "subnetcache") {
		harness.Missing(t, "unbound without the subnetcache module (unbound -V: %s)", strings.TrimSpace(string(out)))
	}
	ip := harness.NewIP(t)
	dir := t.TempDir()
	conf := fmt.Sprintf(`server:
  interface: %[1]s
  port: 53
  do-daemonize: no
  chroot: ""
  username: ""
  directory: "%[2]s"
  pidfile: ""
  use-syslog: no
  logfile: ""
  verbosity: 1
  do-ip6: no
  access-control: 127.0.0.0/8 allow
  do-not-query-localhost: no
  qname-minimisation: no
  module-config: "subnetcache iterator"
  root-hints: "%[3]s"
  send-client-subnet: %[4]s
  max-client-subnet-ipv4: 24
stub-zone:
  name: "%[5]s"
  stub-addr: %[4]s
remote-control:
  control-enable: no
`, ip, dir, u.hints(t, dir), u.ip, zone)
	path := writeFile(t, dir, "unbound.conf", []byte(conf))
	p := harness.StartProcess(t, "unbound", bin, []string{"-d", "-c", path}, dir)
	return waitResolver(t, p, net.JoinHostPort(ip, "53"))
}

// waitResolver waits until the resolver answers (NXDOMAIN from the
// loopback root for a name outside the zone).
func waitResolver(t *testing.T, p *harness.Process, addr string) string {
	t.Helper()
	testkit.Eventually(t, 15*time.Second, p.Name+" answering", func() (bool, string) {
		if !p.Running() {
			t.Fatalf("%s exited: %v\n%s", p.Name, p.ExitErr(), p.Log())
		}
		m, err := harness.Ask(addr, "probe.test.", dns.TypeA, harness.Timeout(500*time.Millisecond), harness.Attempts(1))
		if err != nil {
			return false, err.Error()
		}
		return m.Rcode == dns.RcodeNameError, m.String()
	})
	return addr
}

// askResolver asks the resolver at addr from the loopback source src, as a
// stub resolver does: again after a timeout (at most three tries), never
// after an answer. A wrong answer is never retried away.
func askResolver(src, addr, name string) ([]string, error) {
	var err error
	for range 3 {
		var got []string
		got, err = askFrom(src, addr, name, dns.TypeA)
		var ne net.Error
		if err == nil || !errors.As(err, &ne) || !ne.Timeout() {
			return got, err
		}
	}
	return nil, err
}

// TestGeoipThroughECSCachingResolvers: clients of every region, behind one
// PowerDNS Recursor and one Unbound (subnetcache), asked in every order,
// each get their own region's answer, from the resolver's shared cache
// once it holds it; the roundRobin host is fetched once for everyone.
func TestGeoipThroughECSCachingResolvers(t *testing.T) {
	f := newFleet(t)
	orders := geoOrders()
	for _, tag := range tags {
		testkit.WriteFile(t, f.clusters[tag].dir, "ecs.yaml", resolverHosts(tag, f.targets[tag], 2*len(orders)))
	}
	f.start(t, fleetOptions{gslbExtra: map[string]string{"": resolverGeo}})
	eu := f.clusters["eu"]
	// Every cluster's answers are in eu before a resolver asks.
	known := time.Now()
	defer func() {
		t.Logf("the whole test after eu knew every host: %v", time.Since(known).Round(time.Millisecond))
	}()
	testkit.Eventually(t, startTimeout, "eu knows the ECS hosts' targets", func() (bool, string) {
		for i := range 2 * len(orders) {
			if got, err := ask(eu.addr, geoHost(i), dns.TypeA, harness.ECS("127.0.33.0/24")); err != nil || !equal(got, f.union("ap")) {
				return false, fmt.Sprintf("%s from ap = %v (%v)", geoHost(i), got, err)
			}
		}
		got, err := ask(eu.addr, hostCached, dns.TypeA)
		return err == nil && equal(got, f.union(tags...)), fmt.Sprintf("%s = %v (%v)", hostCached, got, err)
	})
	t.Logf("eu knew every ECS host's targets %v after the fleet converged", time.Since(known).Round(time.Millisecond))
	want := map[string][]string{"us": f.union("us"), "ap": f.union("ap"), "eu": f.union("eu"), "none": f.union(tags...)}

	for ri, resolver := range []struct {
		name  string
		start func(*testing.T, *upstream) string
	}{
		{"pdns-recursor", startPDNSRecursor},
		{"unbound-subnetcache", startUnboundSubnet},
	} {
		t.Run(resolver.name, func(t *testing.T) {
			u := startUpstream(t, eu.addr)
			addr := resolver.start(t, u)
			for oi, order := range orders {
				host := geoHost(ri*len(orders) + oi)
				var seq []string
				for _, ci := range order {
					seq = append(seq, resolverClients[ci].region)
				}
				// Twice in the order: the second round is answered from
				// the cache, then the us neighbour shares us's entry.
				for round := range 2 {
					for _, ci := range order {
						c := resolverClients[ci]
						got, err := askResolver(c.ip, addr, host)
						if err != nil || !equal(got, want[c.region]) {
							n, seen := u.queries(host)
							t.Fatalf("order %v round %d: client %s (%s) got %v (%v), want %v; eu was asked %d times: %v",
								seq, round, c.ip, c.region, got, err, want[c.region], n, seen)
						}
					}
				}
				if got, err := askResolver(resolverNeighbour, addr, host); err != nil || !equal(got, want["us"]) {
					t.Fatalf("order %v: us neighbour %s got %v (%v), want us's %v", seq, resolverNeighbour, got, err, want["us"])
				}
				// One query per client /24, each with its own ECS and
				// scope 24: none answered from another region's entry.
				if n, seen := u.queries(host); n != len(resolverClients) {
					t.Errorf("order %v: eu was asked %d times, want once per client subnet (%d): %v", seq, n, len(resolverClients), seen)
				} else if oi == 0 {
					t.Logf("%s asked eu: %v", resolver.name, seen)
				}
				_, seen := u.queries(host)
				for _, s := range seen {
					if !strings.HasSuffix(s, " scope 24") || !strings.HasPrefix(s, "127.0.") {
						t.Errorf("order %v: eu saw %q, want the client's /24 as ECS and scope 24", seq, s)
					}
				}
			}

			// The roundRobin host: the same for every client, scope 0,
			// fetched once.
			for _, c := range resolverClients {
				if got, err := askResolver(c.ip, addr, hostCached); err != nil || !equal(got, want["none"]) {
					t.Fatalf("client %s (%s): %s = %v (%v), want %v", c.ip, c.region, hostCached, got, err, want["none"])
				}
			}
			if n, seen := u.queries(hostCached); n != 1 || !strings.HasSuffix(seen[0], " scope 0") {
				t.Errorf("%s: eu was asked %d times (%v), want once, answered with scope 0", hostCached, n, seen)
			}
		})
	}
}
