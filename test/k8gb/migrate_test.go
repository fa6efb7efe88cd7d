package k8gb_test

import (
	"fmt"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/fleetdns/fleetdns/internal/testkit"
	"github.com/fleetdns/fleetdns/test/harness"
	"github.com/miekg/dns"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// serveHealth answers GET /healthz on addr with 200 after 300 ms, until
// the test ends: a target that passes localtargets' http check as slowly
// as an ingress across a network may, so that a target whose check starts
// from unknown is withheld long enough for a 50 ms query loop to see it.
func serveHealth(t *testing.T, addr string) {
	t.Helper()
	l, err := net.Listen("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{ReadHeaderTimeout: 5 * time.Second, Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		time.Sleep(300 * time.Millisecond)
		if r.URL.Path != "/healthz" {
			http.NotFound(w, r)
		}
	})}
	t.Cleanup(func() { srv.Close() })
	go srv.Serve(l)
}

// queryLoop asks eu every 50 ms for each name, until stop or a minute
// passed, and keeps every answer that is not want[name].
type queryLoop struct {
	stop chan struct{}
	done chan struct{}

	mu    sync.Mutex
	asked int
	bad   map[string][]string // name -> wrong answers, with the time
}

func startQueryLoop(addr string, want map[string]string) *queryLoop {
	l := &queryLoop{stop: make(chan struct{}), done: make(chan struct{}), bad: map[string][]string{}}
	start := time.Now()
	go func() {
		defer close(l.done)
		tick := time.NewTicker(50 * time.Millisecond)
		defer tick.Stop()
		deadline := time.After(time.Minute)
		for {
			for name, w := range want {
				got := answer(addr, name)
				l.mu.Lock()
				l.asked++
				if got != w {
					l.bad[name] = append(l.bad[name], fmt.Sprintf("%v: %s", time.Since(start).Round(time.Millisecond), got))
				}
				l.mu.Unlock()
			}
			select {
			case <-l.stop:
				return
			case <-deadline:
				return
			case <-tick.C:
			}
		}
	}()
	return l
}

func (l *queryLoop) end() (int, map[string][]string) {
	close(l.stop)
	<-l.done
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.asked, l.bad
}

// ttl is the TTL of the A answer for name at addr, 0 without one.
func ttl(addr, name string) uint32 {
	r, err := harness.Ask(addr+":53", name, dns.TypeA, harness.Timeout(time.Second), harness.Attempts(2))
	if err != nil || len(r.Answer) == 0 {
		return 0
	}
	return r.Answer[0].Header().Ttl
}

// The migration from k8gb's operator (issue 15): under a query loop every
// 50 ms, two hosts move away from the DNSEndpoints k8gb's operator wrote
// (labels k8gb.io/dnstype=local, controlled by their Gslb; no operator
// runs), one to a DNSEndpoint of the user's own (the Gslb deleted, as the
// garbage collector then deletes the operator's object), one to the Gslb
// source (the Corefile reloaded with `resources DNSEndpoint Gslb`). This
// cluster is the failover primary and healthy throughout (its targets pass
// localtargets' http check), its peer is a k8gb cluster: not one answer for
// either host names other than this cluster's target, not one
// localtargets- answer is NODATA.
func TestMigrationFromOperatorNeverWithdrawsHealthyTargets(t *testing.T) {
	const ns = "migrate"
	k := harness.SharedKube(t)
	installGslbCRDs(t, k)
	eu := &site{tag: "eu", ns: ns, k: k, ip: harness.NewIP(t), lb: harness.NewIP(t)}
	eu.world(t)
	ownLB := harness.NewIP(t) // the targets of the host moved to a DNSEndpoint: a check of their own
	port := harness.FreePort(t, eu.lb)
	serveHealth(t, net.JoinHostPort(eu.lb, fmt.Sprint(port)))
	serveHealth(t, net.JoinHostPort(ownLB, fmt.Sprint(port)))
	fqdn := func(h string) string { return h + "." + strings.TrimSuffix(zone, ".") }

	// The Gslbs, and what k8gb's operator wrote for them before it stopped:
	// the assembled answer (failover to eu, healthy: eu's target) and this
	// cluster's localtargets-.
	eu.gslb(t, ns, "shop", "", "  resourceRef: {apiVersion: networking.k8s.io/v1, kind: Ingress, name: shop}\n  strategy: {type: failover, primaryGeoTag: eu, dnsTtlSeconds: 5}\n")
	eu.gslb(t, ns, "own", "k8gb.io/hostname: "+fqdn("own"), "  resourceRef: {apiVersion: v1, kind: Service, name: lb}\n  strategy: {type: failover, primaryGeoTag: eu, dnsTtlSeconds: 5}\n")
	targets := map[string]string{"shop": eu.lb, "own": ownLB}
	for h, target := range targets {
		g, err := k.Dynamic().Resource(gslbGVR("k8gb.io")).Namespace(ns).Get(harness.Context(t), h, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		dep := harness.DNSEndpointObject(ns, h, map[string]string{"k8gb.io/dnstype": "local"},
			harness.Endpoint{DNSName: fqdn(h), RecordType: "A", TTL: 30, Targets: []string{target}, Labels: map[string]string{"strategy": "failover"}},
			harness.Endpoint{DNSName: "localtargets-" + fqdn(h), RecordType: "A", TTL: 30, Targets: []string{target}})
		dep.SetOwnerReferences([]metav1.OwnerReference{{APIVersion: "k8gb.io/v1beta1", Kind: "Gslb", Name: h, UID: g.GetUID(), Controller: new(true), BlockOwnerDeletion: new(true)}})
		k.Create(t, dep)
	}

	// The k8gb peer: its own target for each host, and eu's as the answer.
	usIP, usLB := harness.NewIP(t), harness.NewIP(t)
	zoneFile := fmt.Sprintf(`$ORIGIN %[1]s
@ 30 IN SOA ns.%[1]s hostmaster.%[1]s 1 7200 1800 86400 30
@ 30 IN NS ns.%[1]s
ns 30 IN A %[2]s
localtargets-shop 30 IN A %[3]s
localtargets-own 30 IN A %[3]s
shop 30 IN A %[4]s
own 30 IN A %[5]s
`, zone, usIP, usLB, eu.lb, ownLB)
	zonePath := filepath.Join(t.TempDir(), "zone.db")
	if err := os.WriteFile(zonePath, []byte(zoneFile), 0o644); err != nil {
		t.Fatal(err)
	}
	harness.StartCoreDNS(t, fmt.Sprintf("%s:53 {\n    bind %s\n    file %s\n}\n", zone, usIP, zonePath))

	// Step 1 of the guide, with health checks: the operator's objects are
	// served as written; then `resources Gslb` is added.
	metrics := net.JoinHostPort(eu.ip, fmt.Sprint(harness.FreePort(t, eu.ip)))
	corefile := func(resources string) string {
		cf := eu.corefile(eu.k.Kubeconfig, map[string]string{"us": usIP})
		cf = strings.Replace(cf, "resources Gslb", "resources "+resources, 1)
		cf = strings.Replace(cf, "    localtargets\n", fmt.Sprintf("    localtargets {\n        healthcheck http %d /healthz {\n            interval 1s\n            allow 127.0.0.0/8\n        }\n    }\n", port), 1)
		return strings.Replace(cf, "    errors\n", "    errors\n    prometheus "+metrics+"\n", 1)
	}
	eu.dns = harness.StartCoreDNS(t, corefile("DNSEndpoint"))
	want := map[string]string{}
	for h, target := range targets {
		want[fqdn(h)+"."] = target
		want["localtargets-"+fqdn(h)+"."] = target
	}
	for name, w := range want {
		expect(t, eu.ip, name, w)
	}
	// Serving the operator's objects, which are not health checked.
	if got := ttl(eu.ip, fqdn("shop")+"."); got != 30 {
		t.Fatalf("shop's TTL %d before the move, want the operator's 30", got)
	}
	loop := startQueryLoop(eu.ip, want)
	time.Sleep(time.Second)

	// (b) Host own to a DNSEndpoint of the user's own, then the Gslb deleted
	// (its finalizer is the operator's, and no operator runs) and the
	// operator's DNSEndpoint with it (the garbage collector's work).
	k.CreateDNSEndpoint(t, ns, "own-gslb", nil, harness.Endpoint{DNSName: fqdn("own"), RecordType: "A", TTL: 7, Targets: []string{ownLB},
		ProviderSpecific: [][2]string{{"gslb/strategy", "failover"}, {"gslb/primary", "eu"}, {"gslb/ttl", "5"}}})
	time.Sleep(time.Second)
	moved := time.Now()
	if err := k.Dynamic().Resource(gslbGVR("k8gb.io")).Namespace(ns).Delete(harness.Context(t), "own", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	k.DeleteDNSEndpoint(t, ns, "own")
	testkit.Eventually(t, propagation, "own assembled from the user's DNSEndpoint", func() (bool, string) {
		a, l := ttl(eu.ip, fqdn("own")+"."), ttl(eu.ip, "localtargets-"+fqdn("own")+".")
		return a == 5 && l == 7, fmt.Sprintf("own TTL %d, localtargets-own TTL %d; want 5 and 7 (the user's object)", a, l)
	})
	t.Logf("own served from the user's DNSEndpoint %v after the operator's was deleted", time.Since(moved).Round(time.Millisecond))
	time.Sleep(2 * time.Second) // past the first checks of a target that appeared

	// (a) Host shop to the Gslb source: the Corefile reloaded (the reload
	// plugin's SIGUSR1) with `resources DNSEndpoint Gslb`; the operator's
	// DNSEndpoint stays and is held back.
	reloads := strings.Count(eu.dns.Log(), "Reloading complete")
	if err := os.WriteFile(eu.dns.Corefile, []byte(corefile("DNSEndpoint Gslb")), 0o644); err != nil {
		t.Fatal(err)
	}
	moved = time.Now()
	eu.dns.Signal(syscall.SIGUSR1)
	testkit.Eventually(t, propagation, "shop served from its Gslb", func() (bool, string) {
		n := strings.Count(eu.dns.Log(), "Reloading complete")
		a := ttl(eu.ip, fqdn("shop")+".")
		return n > reloads && a == 5, fmt.Sprintf("%d reloads, shop TTL %d; want a reload and 5 (the Gslb's dnsTtlSeconds)", n-reloads, a)
	})
	t.Logf("shop served from its Gslb %v after the reload", time.Since(moved).Round(time.Millisecond))
	if m := regexp.MustCompile(`(?m)^coredns_k8scrd_gslb_ignored_dnsendpoints (\S+)$`).FindStringSubmatch(harness.HTTPBody(t, "http://"+metrics+"/metrics")); m == nil || m[1] != "1" {
		t.Errorf("coredns_k8scrd_gslb_ignored_dnsendpoints = %v, want 1 (shop's operator object held back)", m)
	}
	time.Sleep(2 * time.Second)

	asked, bad := loop.end()
	t.Logf("%d queries to the primary during both moves", asked)
	for name, answers := range bad {
		kind := "wrong answers"
		if strings.HasPrefix(name, "localtargets-") {
			kind = "wrong or NODATA answers"
		}
		t.Errorf("%s: %d %s from the healthy primary, want none (want %s), e.g. %v", name, len(answers), kind, want[name], answers[:min(len(answers), 5)])
	}
	if !eu.dns.Running() {
		t.Fatalf("coredns exited: %v", eu.dns.ExitErr())
	}
}
