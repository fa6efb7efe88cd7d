package localtargets

// Health checks under hostile tenants (issue 24, findings 3 to 6): the
// built coredns over a folder of DNSEndpoints, checking targets inside a
// network namespace that the test creates. The "internal" addresses (a
// private service address, a metadata address) exist only inside it, on a
// dummy link, routed to it from the test's side: no check can leave it.

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/fleetdns/fleetdns/internal/testkit"
	"github.com/fleetdns/fleetdns/test/harness"

	"github.com/miekg/dns"
)

// internalAddrs exist only inside the lab's namespace: a private service
// address, Alibaba Cloud's and GCP's (IPv6) metadata addresses, and the
// NAT64 form of the private service address (RFC 6052), which a NAT64
// gateway would carry to 10.99.0.1.
var internalAddrs = []string{"10.99.0.1", "100.100.100.200", "fd20:ce::254", "64:ff9b::a63:1"}

// lab is a network namespace with public addresses (198.18.X.10 to .13),
// the internal addresses, and the tenant range 198.18.X.128/25 whose every
// address is local to the namespace (a `local` route), for tenants with
// many targets.
type lab struct {
	ns     *harness.NetNS
	tenant netip.Prefix
}

func newLab(t *testing.T) *lab {
	t.Helper()
	ns := harness.NewNetNS(t, 4)
	ipcmd, _ := exec.LookPath("ip")
	run := func(args ...string) error {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if out, err := exec.CommandContext(ctx, ipcmd, args...).CombinedOutput(); err != nil {
			return fmt.Errorf("ip %s: %v: %s", strings.Join(args, " "), err, out)
		}
		return nil
	}
	must := func(args ...string) {
		if err := run(args...); err != nil {
			t.Fatal(err)
		}
	}
	dev := "int0"
	if err := run("-n", ns.Name, "link", "add", dev, "type", "dummy"); err != nil {
		t.Logf("no dummy link (%v): the internal addresses go on the namespace's loopback", err)
		dev = "lo"
	} else {
		must("-n", ns.Name, "link", "set", dev, "up")
	}
	// IPv6 on the link, in the benchmarking range 2001:2::/48 (RFC 5180).
	b := ns.Host.As4()
	v6 := fmt.Sprintf("2001:2:0:%x::", b[2])
	hostIf := ""
	if out, err := exec.Command(ipcmd, "-o", "addr", "show", "to", ns.Host.String()+"/32").Output(); err == nil && len(strings.Fields(string(out))) > 1 {
		hostIf = strings.TrimSuffix(strings.Fields(string(out))[1], ":")
	}
	nsIf := ""
	if out, err := exec.Command(ipcmd, "-n", ns.Name, "-o", "addr", "show", "to", ns.Addrs[0].String()+"/32").Output(); err == nil && len(strings.Fields(string(out))) > 1 {
		nsIf = strings.TrimSuffix(strings.Fields(string(out))[1], ":")
	}
	if hostIf == "" || nsIf == "" {
		t.Fatalf("the namespace's veth not found (host %q, namespace %q)", hostIf, nsIf)
	}
	must("addr", "add", v6+"1/64", "dev", hostIf, "nodad")
	must("-n", ns.Name, "addr", "add", v6+"10/64", "dev", nsIf, "nodad")
	for _, a := range internalAddrs {
		gw, bits := ns.Addrs[0].String(), "/32"
		if strings.Contains(a, ":") {
			gw, bits = v6+"10", "/128"
		}
		must("-n", ns.Name, "addr", "add", a+bits, "dev", dev, "nodad")
		must("route", "add", a+bits, "via", gw)
		t.Cleanup(func() { run("route", "del", a+bits) })
	}
	gw := ns.Addrs[0].String()
	tenant := netip.PrefixFrom(netip.AddrFrom4([4]byte{b[0], b[1], b[2], 128}), 25)
	must("-n", ns.Name, "route", "add", "local", tenant.String(), "dev", "lo")
	must("route", "add", tenant.String(), "via", gw)
	t.Cleanup(func() { run("route", "del", tenant.String()) })
	return &lab{ns: ns, tenant: tenant}
}

// tenantAddr returns the i-th address of the tenant range (i < 128).
func (l *lab) tenantAddr(i int) string {
	b := l.tenant.Addr().As4()
	b[3] += byte(i)
	return netip.AddrFrom4(b).String()
}

// listen opens a listener inside the namespace: the socket is made on a
// thread switched into it, and keeps the namespace after the thread
// switches back.
func (l *lab) listen(t *testing.T, addr string) net.Listener {
	t.Helper()
	var ln net.Listener
	err := harness.InNetNS("/run/netns/"+l.ns.Name, func() (err error) {
		ln, err = net.Listen("tcp", addr)
		return err
	})
	if err != nil && ln != nil {
		ln.Close()
	}
	if err != nil {
		t.Fatalf("listen on %s in the namespace: %v", addr, err)
	}
	t.Cleanup(func() { ln.Close() })
	return ln
}

// server serves HTTP inside the namespace at addr and counts requests.
type server struct {
	requests atomic.Int64
	mu       sync.Mutex
	hosts    map[string]bool // Host values seen
	srv      *http.Server
}

func (l *lab) serve(t *testing.T, addr, body string) *server {
	t.Helper()
	s := &server{hosts: map[string]bool{}}
	s.srv = &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		s.requests.Add(1)
		s.mu.Lock()
		if len(s.hosts) < 100000 {
			s.hosts[r.Host] = true
		}
		s.mu.Unlock()
		fmt.Fprint(w, body)
	})}
	ln := l.listen(t, addr)
	go s.srv.Serve(ln)
	t.Cleanup(func() { s.srv.Close() })
	return s
}

func (s *server) sawHost(h string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.hosts[h]
}

// reachable fails the test unless a TCP connection to each address opens
// (no request is sent).
func reachable(t *testing.T, addrs ...string) {
	t.Helper()
	for _, a := range addrs {
		c, err := net.DialTimeout("tcp", a, 2*time.Second)
		if err != nil {
			t.Fatalf("%s not reachable from the test's side: %v", a, err)
		}
		c.Close()
	}
}

// startLab starts coredns over a folder with localtargets checking hc
// (the healthcheck line and block).
func startLab(t *testing.T, hc string) (srv *harness.CoreDNS, dir, metricsURL string) {
	t.Helper()
	dir = t.TempDir()
	ip := harness.NewIP(t)
	metrics := harness.HostPort(t, ip)
	srv = harness.StartCoreDNS(t, fmt.Sprintf(`example.org:53 {
    bind %s
    prometheus %s
    localtargets {
        %s
    }
    k8scrd {
        directory %s
    }
}
`, ip, metrics, hc, dir))
	return srv, dir, "http://" + metrics + "/metrics"
}

// checked is an A endpoint with health/* properties (name, value pairs).
func checked(name string, targets []string, props ...string) testkit.Endpoint {
	ep := testkit.EP(name, "A", 30, targets...)
	for i := 0; i+1 < len(props); i += 2 {
		ep.ProviderSpecific = append(ep.ProviderSpecific, [2]string{props[i], props[i+1]})
	}
	return ep
}

// localTargets returns the sorted A targets of localtargets-<label>.
func localTargets(t *testing.T, srv *harness.CoreDNS, label string) []string {
	t.Helper()
	r, err := harness.Ask(srv.Addr, "localtargets-"+label+".example.org.", dns.TypeA)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, rr := range r.Answer {
		if a, ok := rr.(*dns.A); ok {
			out = append(out, a.A.String())
		}
	}
	slices.Sort(out)
	return out
}

func answers(t *testing.T, d time.Duration, srv *harness.CoreDNS, label string, want ...string) {
	t.Helper()
	testkit.Eventually(t, d, "localtargets-"+label, func() error {
		if got := localTargets(t, srv, label); !slices.Equal(got, want) {
			return fmt.Errorf("targets %v, want %v", got, want)
		}
		return nil
	})
}

// TestHostileFinding3TenantChecksNeverDialInternalAddresses: a tenant's
// health/address at a private service address (with a body substring, a
// read oracle), at its NAT64 form, at the metadata addresses
// 100.100.100.200 and fd20:ce::254, and a tenant's
// tcp check of a private target (a port scanner) are never dialled, their
// hosts never served, counted by class and logged once per host; the
// tenant's check of a public address runs as before.
func TestHostileFinding3TenantChecksNeverDialInternalAddresses(t *testing.T) {
	if testing.Short() {
		t.Skip("real processes")
	}
	l := newLab(t)
	secret := l.serve(t, "10.99.0.1:8080", "password=hunter2")
	meta := l.serve(t, "100.100.100.200:80", "ami-id")
	meta6 := l.serve(t, "[fd20:ce::254]:80", "instance/")
	nat64 := l.serve(t, "[64:ff9b::a63:1]:8080", "password=hunter2")
	public := l.serve(t, l.ns.Addr(0)+":8080", "ok")
	// The internal listeners are reachable from coredns's side: a refusal
	// below is fleetdns's, not the network's.
	reachable(t, "10.99.0.1:8080", "100.100.100.200:80", "[fd20:ce::254]:80", "[64:ff9b::a63:1]:8080")
	srv, dir, url := startLab(t, "healthcheck tcp 8080 {\n            interval 500ms\n            timeout 400ms\n        }")
	testkit.WriteFile(t, dir, "tenant.yaml", testkit.DNSEndpoint("tenant", "probes", nil,
		checked("oracle.example.org", []string{l.ns.Addr(1)},
			"health/check", "http 8080 /secrets", "health/expect", "200 hunter2", "health/address", "10.99.0.1"),
		checked("meta.example.org", []string{l.ns.Addr(1)},
			"health/check", "http 80 /latest/meta-data/", "health/address", "100.100.100.200"),
		checked("scan.example.org", []string{"10.99.0.1"}, "health/check", "tcp 8080"),
		checked("meta6.example.org", []string{l.ns.Addr(1)},
			"health/check", "http 80 /computeMetadata/v1/", "health/address", "fd20:ce::254"),
		checked("nat64.example.org", []string{l.ns.Addr(1)},
			"health/check", "http 8080 /secrets", "health/expect", "200 hunter2", "health/address", "64:ff9b::a63:1"),
		checked("public.example.org", []string{l.ns.Addr(0)}, "health/check", "http 8080 /healthz", "health/expect", "200 ok"),
	))
	answers(t, 10*time.Second, srv, "public", l.ns.Addr(0))
	time.Sleep(2 * time.Second) // four intervals
	if n := secret.requests.Load(); n != 0 {
		t.Errorf("the private service at 10.99.0.1 got %d requests from tenant-set checks", n)
	}
	if n := meta.requests.Load(); n != 0 {
		t.Errorf("the metadata address 100.100.100.200 got %d requests", n)
	}
	if n := meta6.requests.Load(); n != 0 {
		t.Errorf("the metadata address fd20:ce::254 got %d requests", n)
	}
	if n := nat64.requests.Load(); n != 0 {
		t.Errorf("64:ff9b::a63:1 (NAT64 of 10.99.0.1) got %d requests", n)
	}
	if public.requests.Load() == 0 {
		t.Error("the tenant's check of a public address never ran")
	}
	for _, h := range []string{"oracle", "meta", "scan", "meta6", "nat64"} {
		if got := localTargets(t, srv, h); len(got) != 0 {
			t.Errorf("localtargets-%s: %v, want NODATA (the verdict of a refused check is nowhere)", h, got)
		}
	}
	if n := harness.Scrape(t, url).Sum("coredns_localtargets_refused_targets", "class", "private"); n != 3 {
		t.Errorf("refused_targets{class=private} %v, want 3 (oracle, scan, nat64)", n)
	}
	if n := harness.Scrape(t, url).Sum("coredns_localtargets_refused_targets", "class", "metadata"); n != 2 {
		t.Errorf("refused_targets{class=metadata} %v, want 2 (meta, meta6)", n)
	}
	for _, h := range []string{"oracle", "meta", "scan", "meta6", "nat64"} {
		if n := strings.Count(srv.Log(), "Health check of "+h+".example.org. refused"); n != 1 {
			t.Errorf("%s logged %d times as refused, want once", h, n)
		}
	}
}

// TestHostileFinding3DenyAndTenantWords: `deny` refuses a public address
// to every check (the operator's too), `tenant_address off` and
// `tenant_body off` refuse the hosts that set them; `allow` opens the
// private range to tenants, but not the metadata address inside 100.64/10.
func TestHostileFinding3DenyAndTenantWords(t *testing.T) {
	if testing.Short() {
		t.Skip("real processes")
	}
	l := newLab(t)
	secret := l.serve(t, "10.99.0.1:8080", "password=hunter2")
	meta := l.serve(t, "100.100.100.200:8080", "ami-id")
	denied := l.serve(t, l.ns.Addr(2)+":8080", "ok")
	l.serve(t, l.ns.Addr(0)+":8080", "ok")
	srv, dir, url := startLab(t, fmt.Sprintf("healthcheck tcp 8080 {\n            interval 500ms\n            timeout 400ms\n            allow 10.0.0.0/8 100.64.0.0/10\n            deny %s/32\n            tenant_address off\n            tenant_body off\n        }", l.ns.Addr(2)))
	testkit.WriteFile(t, dir, "tenant.yaml", testkit.DNSEndpoint("tenant", "probes", nil,
		checked("addr.example.org", []string{l.ns.Addr(0)}, "health/check", "http 8080 /", "health/address", "10.99.0.1"),
		checked("body.example.org", []string{"10.99.0.1"}, "health/check", "http 8080 /", "health/expect", "200 hunter2"),
		checked("meta.example.org", []string{"100.100.100.200"}, "health/check", "tcp 8080"),
		checked("private.example.org", []string{"10.99.0.1"}, "health/check", "tcp 8080"),
		testkit.EP("denied.example.org", "A", 30, l.ns.Addr(2)),
		testkit.EP("plain.example.org", "A", 30, l.ns.Addr(0)),
	))
	answers(t, 10*time.Second, srv, "plain", l.ns.Addr(0))
	answers(t, 10*time.Second, srv, "private", "10.99.0.1") // allow 10.0.0.0/8: a tcp check, no request
	time.Sleep(2 * time.Second)
	if n := secret.requests.Load(); n != 0 {
		t.Errorf("10.99.0.1 got %d HTTP requests (tenant_address off, tenant_body off)", n)
	}
	if n := meta.requests.Load() + denied.requests.Load(); n != 0 {
		t.Errorf("the metadata or the denied address got %d requests", n)
	}
	for _, h := range []string{"addr", "body", "meta", "denied"} {
		if got := localTargets(t, srv, h); len(got) != 0 {
			t.Errorf("localtargets-%s: %v, want NODATA", h, got)
		}
	}
	for class, want := range map[string]float64{"tenant_address": 1, "tenant_body": 1, "metadata": 1, "denied": 1} {
		if n := harness.Scrape(t, url).Sum("coredns_localtargets_refused_targets", "class", class); n != want {
			t.Errorf("refused_targets{class=%s} %v, want %v", class, n, want)
		}
	}
}

// TestHostileFinding4ZoneCapSharedAndCappedVerdictsExpire: a namespace's
// hosts under names that sort first do not take the zone's whole
// max_per_zone; the victim's target pushed beyond the cap is withdrawn at
// once instead of served on its last verdict while its backend is down.
func TestHostileFinding4ZoneCapSharedAndCappedVerdictsExpire(t *testing.T) {
	if testing.Short() {
		t.Skip("real processes")
	}
	l := newLab(t)
	// Every address of the namespace answers: the victim's and the
	// tenant's checks pass.
	l.serve(t, "0.0.0.0:8080", "ok")
	srv, dir, _ := startLab(t, "healthcheck tcp 8080 {\n            interval 500ms\n            timeout 400ms\n            max_per_zone 4\n        }")
	victim := []string{l.ns.Addr(0), l.ns.Addr(1), l.ns.Addr(2)}
	testkit.WriteFile(t, dir, "victim.yaml", testkit.DNSEndpoint("victim", "app", nil, testkit.EP("z.example.org", "A", 30, victim...)))
	answers(t, 10*time.Second, srv, "z", victim...)

	// The tenant's 8 hosts x 16 targets sort first; the cap of 4 is shared
	// tenant, victim, tenant, victim: the victim keeps .10 and .11.
	var eps []testkit.Endpoint
	for h := range 8 {
		var ts []string
		for j := range 16 {
			ts = append(ts, l.tenantAddr(h*16+j))
		}
		eps = append(eps, testkit.EP(fmt.Sprintf("a%d.example.org", h), "A", 30, ts...))
	}
	testkit.WriteFile(t, dir, "tenant.yaml", testkit.DNSEndpoint("tenant", "many", nil, eps...))
	answers(t, 3*time.Second, srv, "z", victim[:2]...)
	answers(t, 3*time.Second, srv, "a0", l.tenantAddr(0), l.tenantAddr(1))
	// Ten seconds on, the victim is still served from checks that run.
	time.Sleep(5 * time.Second)
	answers(t, time.Second, srv, "z", victim[:2]...)
}

// TestHostileFinding5TarpitDoesNotStarveOthers: a namespace's 200 checks
// against a tarpit (it accepts and never answers, holding each check for
// the whole timeout) do not delay another namespace's new host: its first
// check passes and it is served within a second and a half, not after the
// tarpit's round (200 x 1 s / 8 workers = 25 s).
func TestHostileFinding5TarpitDoesNotStarveOthers(t *testing.T) {
	if testing.Short() {
		t.Skip("real processes")
	}
	l := newLab(t)
	l.serve(t, l.ns.Addr(0)+":8080", "ok")
	tarpit := l.listen(t, "0.0.0.0:8081")
	var held sync.Mutex
	var conns []net.Conn
	go func() {
		for {
			c, err := tarpit.Accept()
			if err != nil {
				return
			}
			held.Lock()
			conns = append(conns, c)
			held.Unlock()
		}
	}()
	t.Cleanup(func() {
		held.Lock()
		defer held.Unlock()
		for _, c := range conns {
			c.Close()
		}
	})
	srv, dir, _ := startLab(t, "healthcheck tcp 8080 {\n            interval 5s\n            timeout 1s\n            max_per_host 100\n        }")
	var eps []testkit.Endpoint
	for h := range 2 { // 2 hosts x 100 targets, 200 checks
		var ts []string
		for j := range 100 {
			ts = append(ts, l.tenantAddr(j))
		}
		eps = append(eps, checked(fmt.Sprintf("a%d.example.org", h), ts, "health/check", fmt.Sprintf("http 8081 /%d", h)))
	}
	testkit.WriteFile(t, dir, "tenant.yaml", testkit.DNSEndpoint("tenant", "tarpit", nil, eps...))
	testkit.Eventually(t, 10*time.Second, "the tarpit holds the workers", func() bool {
		held.Lock()
		defer held.Unlock()
		return len(conns) >= 6
	})
	start := time.Now()
	testkit.WriteFile(t, dir, "victim.yaml", testkit.DNSEndpoint("victim", "app", nil, testkit.EP("victim.example.org", "A", 30, l.ns.Addr(0))))
	answers(t, 5*time.Second, srv, "victim", l.ns.Addr(0))
	d := time.Since(start)
	t.Logf("the victim's host served %v after its manifest was written", d.Round(10*time.Millisecond))
	if d > 1500*time.Millisecond {
		t.Errorf("the victim's host served %v after it appeared, want within 1.5 s (its first check waited for the tarpit)", d.Round(10*time.Millisecond))
	}
}

// TestHostileFinding6RotatedHostValuesLeaveNothing: a namespace rewrites
// its 1,000 hosts' health/check Host values 12 times (12,000 distinct
// values, each checked once). The process's RSS (read from outside, in
// /proc) grows by at most 12 MiB from round 3 to round 12, and after the
// hosts are deleted comes back within 12 MiB of round 3's. One client per
// Host value, kept for ever, grew it by 30 MiB (about 3.4 KiB a value) that stayed.
func TestHostileFinding6RotatedHostValuesLeaveNothing(t *testing.T) {
	if testing.Short() {
		t.Skip("real processes")
	}
	l := newLab(t)
	target := l.serve(t, l.ns.Addr(0)+":8080", "ok")
	srv, dir, _ := startLab(t, "healthcheck tcp 8080 {\n            interval 1m\n            timeout 1s\n        }")
	const hosts, rounds = 1000, 12
	rss := func() float64 {
		v, err := srv.RSS()
		if err != nil {
			t.Fatal(err)
		}
		return float64(v) / (1 << 20)
	}
	var at3 float64
	for r := range rounds {
		var eps []testkit.Endpoint
		for i := range hosts {
			eps = append(eps, checked(fmt.Sprintf("h%d.example.org", i), []string{l.ns.Addr(0)},
				"health/check", fmt.Sprintf("http 8080 /healthz r%d-h%d.tenant.example", r, i)))
		}
		testkit.WriteFile(t, dir, "tenant.yaml", testkit.DNSEndpoint("tenant", "rotating", nil, eps...))
		testkit.Eventually(t, time.Minute, fmt.Sprintf("round %d checked", r), func() error {
			for i := range hosts {
				if !target.sawHost(fmt.Sprintf("r%d-h%d.tenant.example", r, i)) {
					return fmt.Errorf("Host r%d-h%d not yet checked", r, i)
				}
			}
			return nil
		})
		if r == 2 {
			at3 = rss()
		}
	}
	at12 := rss()
	t.Logf("RSS after round 3 %.1f MiB, after round %d %.1f MiB", at3, rounds, at12)
	if at12-at3 > 12 {
		t.Errorf("RSS grew by %.1f MiB from round 3 to %d (9,000 more Host values), want at most 12 MiB", at12-at3, rounds)
	}
	if err := os.Remove(filepath.Join(dir, "tenant.yaml")); err != nil {
		t.Fatal(err)
	}
	var last float64
	note, ok := testkit.Within(45*time.Second, func() (bool, string) {
		last = rss()
		return last-at3 <= 12, fmt.Sprintf("RSS %.1f MiB", last)
	})
	t.Logf("RSS after deletion %.1f MiB", last)
	if !ok {
		t.Errorf("45 s after the hosts were deleted: %s, want within 12 MiB of round 3's %.1f MiB", note, at3)
	}
}
