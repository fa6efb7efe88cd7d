package fleet

import (
	"context"
	"fmt"
	"maps"
	"net"
	"net/netip"
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/fleetdns/fleetdns/internal/testkit"
	"github.com/fleetdns/fleetdns/plugin/gslb/fleet"
	"github.com/fleetdns/fleetdns/plugin/gslb/fleet/fleettest"
	"github.com/fleetdns/fleetdns/test/harness"

	"github.com/miekg/dns"
)

const zone = "example.org."

// primary is the cluster whose view Knot follows: the coredns binary
// serving the GSLB zone from a directory source with `fleet { key FILE
// also_notify KNOT }` (plugin/gslb/README.md, "fleet"). Knot is no peer of
// it: also_notify is how a cluster tells a stock secondary of a new serial.
type primary struct {
	srv    *harness.CoreDNS
	dir    string // the directory source: the hosts' manifests
	view   *fleet.Follower
	serial uint32
}

func newPrimary(t *testing.T, keyText string, keys *fleet.Keys, secondary string) *primary {
	t.Helper()
	harness.RequirePlugins(t, "k8scrd", "localtargets", "gslb")
	ip := harness.NewIP(t)
	p := &primary{dir: t.TempDir()}
	p.srv = harness.StartCoreDNS(t, fmt.Sprintf(`%[1]s:53 {
    bind %[2]s
    localtargets
    gslb %[1]s {
        geotag eu
        refresh 30s
        fleet {
            key fleet.key
            also_notify %[3]s
        }
    }
    k8scrd %[1]s {
        directory %[4]s
    }
    errors
}
`, zone, ip, secondary, p.dir), harness.WithFile("fleet.key", keyText))
	p.view = fleet.NewFollower(zone, p.srv.Addr, keys, fleet.Limits{})
	return p
}

func (p *primary) Addr() string { return p.srv.Addr }

// SetHosts writes hosts as the cluster's manifests (objects of 500
// endpoints) and waits until its view holds them: the cluster sets the view
// and NOTIFYs the secondary on its own.
func (p *primary) SetHosts(t *testing.T, hosts []fleet.Host) {
	t.Helper()
	var docs []string
	for i := 0; i < len(hosts); i += 500 {
		var eps []testkit.Endpoint
		for _, h := range hosts[i:min(len(hosts), i+500)] {
			var ps [][2]string
			for _, k := range slices.Sorted(maps.Keys(h.Policy)) {
				ps = append(ps, [2]string{k, h.Policy[k]})
			}
			for _, fam := range []struct {
				rtype string
				addrs []netip.Addr
			}{{"A", h.A}, {"AAAA", h.AAAA}} {
				if len(fam.addrs) == 0 {
					continue
				}
				var targets []string
				for _, a := range fam.addrs {
					targets = append(targets, a.String())
				}
				eps = append(eps, testkit.Endpoint{DNSName: strings.TrimSuffix(h.Name, "."), RecordType: fam.rtype, TTL: int64(h.TTL), Targets: targets, ProviderSpecific: ps})
				ps = nil // the host's properties, once
			}
		}
		docs = append(docs, testkit.DNSEndpoint("apps", fmt.Sprintf("hosts-%d", i), nil, eps...))
	}
	testkit.WriteFile(t, p.dir, "hosts.yaml", strings.Join(docs, "\n---\n"))
	testkit.Eventually(t, 20*time.Second, "the cluster's view holds the hosts written", func() (bool, string) {
		v, _, err := p.view.Check(context.Background())
		if err != nil {
			return false, err.Error()
		}
		if v.Serial == p.serial || !reflect.DeepEqual(v.Hosts, hosts) {
			return false, fmt.Sprintf("view serial %d with %d hosts, want a new serial with %d hosts\n%s", v.Serial, len(v.Hosts), len(hosts), p.srv.Log())
		}
		p.serial = v.Serial
		return true, ""
	})
}

func (p *primary) Serial(t *testing.T) uint32 { return p.serial }

// hosts returns n roundRobin hosts of zone (gen changes the second address
// of each) and a name too long for the readable owner, sorted by name as a
// view is.
func hosts(n, gen int) []fleet.Host {
	hs := fleettest.Hosts(zone, n, gen)
	for i := range hs {
		hs[i].Policy = map[string]string{"gslb/strategy": "roundRobin"}
		if i%2 == 1 {
			hs[i].Policy = map[string]string{"gslb/primary": "eu", "gslb/strategy": "failover"}
		}
	}
	return append(hs,
		fleet.Host{Name: strings.Repeat(strings.Repeat("l", 63)+".", 3) + strings.Repeat("l", 47) + "." + zone, TTL: 30,
			AAAA: []netip.Addr{netip.MustParseAddr("fd00::99")}})
}

// knotSecondary is knotd as a secondary of the view at primaryAddr, with key.
type knotSecondary struct {
	*harness.Process
	Addr string
}

// startKnotSecondary starts knotd on addr (from harness.NewAddr) following
// the view of zone at primaryAddr: transfers and NOTIFYs need the key, and
// the key may transfer the zone out of Knot too (kdig reads it there).
func startKnotSecondary(t *testing.T, addr, primaryAddr, keyName, secret string) *knotSecondary {
	t.Helper()
	bin := harness.LookPath(t, "knotd")
	ip, _, _ := net.SplitHostPort(addr)
	pip, pport, _ := net.SplitHostPort(primaryAddr)
	dir := t.TempDir()
	conf := fmt.Sprintf(`server:
    rundir: %[1]q
    listen: %[2]s@53
    udp-workers: 1
    tcp-workers: 1
    background-workers: 1
log:
  - target: stderr
    any: info
database:
    storage: %[1]q
key:
  - id: %[3]s
    algorithm: hmac-sha256
    secret: %[4]s
remote:
  - id: primary
    address: %[5]s@%[6]s
    key: %[3]s
acl:
  - id: fleet
    address: 127.0.0.0/8
    key: %[3]s
    action: [notify, transfer]
template:
  - id: default
    storage: %[1]q
    zonefile-sync: -1
zone:
  - domain: %[7]s
    master: primary
    acl: fleet
`, dir, ip, strings.TrimSuffix(keyName, "."), secret, pip, pport, fleet.Name(zone))
	cf := filepath.Join(dir, "knot.conf")
	if err := os.WriteFile(cf, []byte(conf), 0o644); err != nil {
		t.Fatal(err)
	}
	// A name of its own, as harness.StartKnot does: the dependency
	// script stops the packaged knotd by name.
	own := filepath.Join(dir, "fleetdns-knotd")
	if err := os.Symlink(bin, own); err != nil {
		t.Fatal(err)
	}
	return &knotSecondary{Process: harness.StartProcess(t, "knotd", own, []string{"-c", cf}, dir), Addr: addr}
}

// serial returns the serial Knot serves for the view (0: none yet).
func serial(addr string, keys *fleet.Keys) uint32 {
	m := new(dns.Msg)
	m.SetQuestion(fleet.Name(zone), dns.TypeSOA)
	keys.Sign(m)
	c := &dns.Client{Timeout: 500 * time.Millisecond, TsigSecret: keys.Secrets()}
	r, _, err := c.Exchange(m, addr)
	if err != nil || r.Rcode != dns.RcodeSuccess || len(r.Answer) == 0 {
		return 0
	}
	if soa, ok := r.Answer[0].(*dns.SOA); ok {
		return soa.Serial
	}
	return 0
}

// axfr returns the records that kdig -y transfers from addr, sorted, SOA
// once.
func axfr(t *testing.T, addr, tsig string) []string {
	t.Helper()
	out := harness.Kdig(t, addr, "-y", tsig, "+noall", "+answer", "+nocrypto", fleet.Name(zone), "AXFR")
	seen := map[string]bool{}
	var rrs []string
	for _, l := range strings.Split(out, "\n") {
		if l = strings.TrimSpace(l); l == "" || strings.HasPrefix(l, ";") {
			continue
		}
		rr, err := dns.NewRR(l)
		if err != nil {
			t.Fatalf("kdig printed %q: %v", l, err)
		}
		s := rr.String()
		if rr.Header().Rrtype == dns.TypeTSIG || seen[s] {
			continue
		}
		seen[s] = true
		rrs = append(rrs, s)
	}
	slices.Sort(rrs)
	return rrs
}

func TestKnotFollowsTheViewWithTheFleetKey(t *testing.T) {
	harness.LookPath(t, "knotd")
	harness.LookPath(t, "kdig")
	keyText := fleettest.Key("fleet")
	keys := fleettest.Keys(t, keyText)
	secret := keys.Secrets()["fleet."]
	tsig := "hmac-sha256:fleet:" + secret

	knotAddr := harness.NewAddr(t)
	pr := newPrimary(t, keyText, keys, knotAddr)
	pr.SetHosts(t, hosts(2000, 0)) // about 0.5 MB: many AXFR messages, each signed
	knot := startKnotSecondary(t, knotAddr, pr.Addr(), "fleet", secret)

	// AXFR at start.
	want := pr.Serial(t)
	testkit.Eventually(t, 20*time.Second, "Knot serves the view by AXFR", func() (bool, string) {
		s := serial(knotAddr, keys)
		return s == want, fmt.Sprintf("Knot serial %d, want %d\n%s", s, want, knot.Log())
	})
	if !regexp.MustCompile(`AXFR, incoming.*finished`).MatchString(knot.Log()) {
		t.Fatalf("no finished incoming AXFR in Knot's log:\n%s", knot.Log())
	}
	primaryView := axfr(t, pr.Addr(), tsig)
	if got := axfr(t, knotAddr, tsig); !slices.Equal(got, primaryView) {
		t.Fatalf("Knot serves %d records, the primary %d; first difference: %s", len(got), len(primaryView), firstDiff(got, primaryView))
	}
	// SOA, NS; TXT, 2 A, AAAA a host; PTR, TXT, AAAA of the long one.
	if want := 2 + 2000*4 + 3; len(primaryView) != want {
		t.Fatalf("the view has %d records, want %d", len(primaryView), want)
	}

	// The other way round: a fleet Follower reads the view from Knot (a
	// stock server that re-serves it) as from the primary.
	fromKnot := fleet.NewFollower(zone, knotAddr, keys, fleet.Limits{})
	fromPrimary := fleet.NewFollower(zone, pr.Addr(), keys, fleet.Limits{})
	sameView(t, fromKnot, fromPrimary)

	// A change, NOTIFYed: IXFR, well before the SOA refresh (30 s).
	hs := hosts(2000, 0)
	hs[7].A = hs[7].A[:1]
	hs = append(hs[:9], hs[10:]...)
	start := time.Now()
	pr.SetHosts(t, hs)
	want = pr.Serial(t)
	testkit.Eventually(t, 5*time.Second, "Knot follows the NOTIFY", func() (bool, string) {
		s := serial(knotAddr, keys)
		return s == want, fmt.Sprintf("Knot serial %d, want %d\n%s", s, want, knot.Log())
	})
	t.Logf("change to Knot's new serial: %v", time.Since(start))
	log := knot.Log()
	if !regexp.MustCompile(`(?i)notify, incoming.*serial ` + fmt.Sprint(want)).MatchString(log) {
		t.Errorf("no incoming NOTIFY of serial %d in Knot's log:\n%s", want, log)
	}
	if !regexp.MustCompile(`IXFR, incoming.*finished`).MatchString(log) {
		t.Fatalf("no finished incoming IXFR in Knot's log:\n%s", log)
	}
	primaryView = axfr(t, pr.Addr(), tsig)
	if got := axfr(t, knotAddr, tsig); !slices.Equal(got, primaryView) {
		t.Fatalf("after the IXFR Knot serves %d records, the primary %d; first difference: %s", len(got), len(primaryView), firstDiff(got, primaryView))
	}

	// Knot's IXFR (from its own journal) reads as well.
	sameView(t, fromKnot, fromPrimary)
	if !regexp.MustCompile(`IXFR, outgoing.*finished`).MatchString(knot.Log()) {
		t.Fatalf("the Follower of Knot did no IXFR; Knot's log:\n%s", knot.Log())
	}

	// kdig -y reads single names of the view, at both.
	for _, addr := range []string{pr.Addr(), knotAddr} {
		out := short(harness.Kdig(t, addr, "-y", tsig, "+short", "h00007.h."+fleet.Name(zone), "A"))
		if out != "198.18.0.7" {
			t.Errorf("kdig -y h00007 A at %s: %q, want 198.18.0.7", addr, out)
		}
		out = short(harness.Kdig(t, addr, "-y", tsig, "+short", "h00007.h."+fleet.Name(zone), "TXT"))
		if out != `"gslb/primary=eu" "gslb/strategy=failover"` {
			t.Errorf("kdig -y h00007's TXT at %s: %q", addr, out)
		}
	}

	// Refused: an unsigned NOTIFY (at the cluster: REFUSED, counted; Knot
	// ignores it), a transfer with a wrong key (at the cluster and at
	// Knot), an unsigned query.
	m := new(dns.Msg)
	m.SetNotify(fleet.Name(zone))
	if r, err := dns.Exchange(m, pr.Addr()); err != nil || r.Rcode != dns.RcodeRefused {
		t.Errorf("unsigned NOTIFY to the cluster: %v %v, want REFUSED", r, err)
	}
	r, err := dns.Exchange(m, knotAddr)
	if err != nil || r.Rcode == dns.RcodeSuccess {
		t.Errorf("unsigned NOTIFY to Knot: %v %v, want refused", r, err)
	} else {
		t.Logf("unsigned NOTIFY to Knot: %s", dns.RcodeToString[r.Rcode])
	}
	wrong := "hmac-sha256:fleet:" + fleettest.Keys(t, fleettest.Key("fleet")).Secrets()["fleet."]
	for _, addr := range []string{pr.Addr(), knotAddr} {
		host, port, _ := net.SplitHostPort(addr)
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		out, _ := harness.Run(ctx, harness.LookPath(t, "kdig"), "@"+host, "-p", port, "-y", wrong, fleet.Name(zone), "AXFR")
		cancel()
		if strings.Contains(out, "\tA\t") || !regexp.MustCompile(`REFUSED|NOTAUTH|BADSIG|failed`).MatchString(out) {
			t.Errorf("AXFR with a wrong key from %s was not refused:\n%s", addr, out)
		}
		for _, l := range strings.Split(out, "\n") {
			if strings.Contains(l, "REFUSED") || strings.Contains(l, "NOTAUTH") || strings.Contains(l, "failed") {
				t.Logf("AXFR with a wrong key from %s: %s", addr, strings.TrimSpace(l))
				break
			}
		}
	}
	if r, err := harness.Ask(pr.Addr(), fleet.Name(zone), dns.TypeSOA); err != nil || r.Rcode != dns.RcodeRefused {
		t.Errorf("unsigned SOA query to the primary: %v %v, want REFUSED", r, err)
	}
}

// sameView checks that two Followers read the same view.
func sameView(t *testing.T, a, b *fleet.Follower) {
	t.Helper()
	va, _, err := a.Check(context.Background())
	if err != nil {
		t.Fatalf("Follower of %s: %v", a.Peer(), err)
	}
	vb, _, err := b.Check(context.Background())
	if err != nil {
		t.Fatalf("Follower of %s: %v", b.Peer(), err)
	}
	if va.Serial != vb.Serial || !reflect.DeepEqual(va.Hosts, vb.Hosts) {
		t.Fatalf("the view from %s (serial %d, %d hosts) differs from the one from %s (serial %d, %d hosts)",
			a.Peer(), va.Serial, len(va.Hosts), b.Peer(), vb.Serial, len(vb.Hosts))
	}
}

// short is kdig +short's answer without the TSIG pseudo-section after it.
func short(out string) string {
	out, _, _ = strings.Cut(out, "\n\n")
	return strings.TrimSpace(out)
}

func firstDiff(a, b []string) string {
	for i := range min(len(a), len(b)) {
		if a[i] != b[i] {
			return fmt.Sprintf("%q vs %q", a[i], b[i])
		}
	}
	return fmt.Sprintf("lengths %d vs %d", len(a), len(b))
}
