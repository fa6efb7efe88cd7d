package fleet

import (
	"context"
	"fmt"
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

// primary serves the view that Knot follows.
//
// The test runs against goPrimary: a fleet.Publisher in a dns.Server inside
// the test, wrapped as CoreDNS wraps a plugin (fleettest.Handler). To run it
// against the coredns binary, write a corednsPrimary and return it from
// newPrimary; nothing else in the test depends on who the primary is. Start
// it with harness.StartCoreDNS on harness.NewIP(t), with the key file
// (fleettest.Key's text, through harness.WithFile) and a Corefile such as
//
//	example.org:53 {
//	    bind IP
//	    k8scrd { directory DIR }    # the hosts, as the sources tests write them
//	    localtargets ...
//	    gslb example.org {
//	        geotag eu
//	        peer knot KNOT_ADDR     # the secondary gets the NOTIFYs
//	        fleet { key KEYFILE }
//	    }
//	}
//
// (the words are in plugin/gslb/README.md, "fleet"; Knot then also plays a
// peer that serves a view, which does not matter here). Its SetHosts writes
// the hosts' manifests into DIR and waits until the view's SOA serial moves
// (fleet.NewFollower(...).Check); Serial returns that serial and Addr the
// server's IP:53. The records compared are the view's, so hosts(n, gen) must
// be written as sources that give the same targets and gslb/* properties.
type primary interface {
	Addr() string                              // "ip:port" of the view
	SetHosts(t *testing.T, hosts []fleet.Host) // change the view and NOTIFY the secondary
	Serial(t *testing.T) uint32                // the view's SOA serial
}

type goPrimary struct {
	p         *fleet.Publisher
	addr      string
	secondary string
}

func newPrimary(t *testing.T, keys *fleet.Keys, secondary string) primary {
	p := fleet.NewPublisher(zone, keys, fleet.Limits{})
	addr := fleettest.Serve(t, harness.HostPort(t, harness.NewIP(t)), fleettest.Handler(p), keys.Secrets())
	return &goPrimary{p: p, addr: addr, secondary: secondary}
}

func (g *goPrimary) Addr() string { return g.addr }

func (g *goPrimary) SetHosts(t *testing.T, hosts []fleet.Host) {
	if _, changed := g.p.Set(hosts); !changed {
		t.Fatal("SetHosts: the view did not change")
	}
	g.p.Notify(context.Background(), []string{g.secondary})
}

func (g *goPrimary) Serial(t *testing.T) uint32 { return g.p.View().Serial }

// hosts returns n hosts of zone (gen changes the second address of each),
// the zone's apex as a host, and a name too long for the readable owner.
func hosts(n, gen int) []fleet.Host {
	return append(fleettest.Hosts(zone, n, gen),
		fleet.Host{Name: zone, TTL: 60, Policy: map[string]string{"gslb/strategy": "failover", "gslb/primary": "eu"}},
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
	pr := newPrimary(t, keys, knotAddr)
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
	// SOA, NS; TXT, 2 A, AAAA a host; the apex host's TXT; PTR, TXT, AAAA
	// of the long one.
	if want := 2 + 2000*4 + 1 + 3; len(primaryView) != want {
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
		out = short(harness.Kdig(t, addr, "-y", tsig, "+short", "h."+fleet.Name(zone), "TXT"))
		if out != `"gslb/primary=eu" "gslb/strategy=failover"` {
			t.Errorf("kdig -y the apex host's TXT at %s: %q", addr, out)
		}
	}

	// Refused: an unsigned NOTIFY (Knot ignores it), a transfer with a
	// wrong key (at the primary and at Knot), an unsigned query.
	m := new(dns.Msg)
	m.SetNotify(fleet.Name(zone))
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
