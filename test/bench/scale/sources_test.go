package scale_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/fleetdns/fleetdns/test/bench/benchkit"
	"github.com/fleetdns/fleetdns/test/harness"
	"github.com/miekg/dns"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
)

// The sources benchmark: hosts derived from Ingresses (issue 13) against the
// same hosts written as DNSEndpoints.
const (
	healthGoal   = 250 * time.Millisecond // p99, EndpointSlice readiness change -> localtargets- answer
	createBudget = 20 * time.Minute       // all the creates of one data set
)

// srcHost is host i of the sources data set; srcLB its load balancer's
// status address and srcPod its backend's endpoint address: 198.18.0.0/15
// data that nothing ever contacts (no health checks are configured).
func srcHost(i int) string { return fmt.Sprintf("i%d.src.scale.bench", i) }
func srcLB(i int) string   { return fmt.Sprintf("198.18.%d.%d", i/250, 1+i%250) }
func srcPod(i int) string  { return fmt.Sprintf("198.19.%d.%d", i/250, 1+i%250) }
func srcAlt(i int) string  { return fmt.Sprintf("198.19.%d.%d", 128+i/250, 1+i%250) }

// srcData is one sources data set in the API server.
type srcData struct {
	n        int
	ns       string
	created  time.Duration
	creators int
	calls    int // API calls made
}

// parallel runs do(i) for i in [0, n) on workers goroutines, each call
// bounded by 60 s and all of them by createBudget, and fails on the first error.
func parallel(t *testing.T, n, workers int, do func(ctx context.Context, i int) error) {
	t.Helper()
	all, cancel := context.WithTimeout(context.Background(), createBudget)
	defer cancel()
	work := make(chan int)
	var mu sync.Mutex
	var first error
	var wg sync.WaitGroup
	for range workers {
		wg.Go(func() {
			for i := range work {
				ctx, done := context.WithTimeout(all, 60*time.Second)
				err := do(ctx, i)
				done()
				if err != nil {
					mu.Lock()
					if first == nil {
						first = err
					}
					mu.Unlock()
					cancel()
				}
			}
		})
	}
feed:
	for i := range n {
		select {
		case work <- i:
		case <-all.Done():
			break feed
		}
	}
	close(work)
	wg.Wait()
	if first != nil {
		t.Fatal(first)
	}
	if err := all.Err(); err != nil {
		t.Fatalf("creating %d objects: %v (budget %v)", n, err, createBudget)
	}
}

// loadIngresses creates n Ingresses in a namespace of their own, each with
// one host, a backend Service (headless: type ClusterIP without a cluster
// IP, so 10,000 of them allocate nothing) whose EndpointSlice has one ready
// endpoint, and a load balancer address set through the status subresource.
func loadIngresses(t *testing.T, k *harness.Kube, n int) *srcData {
	t.Helper()
	d := &srcData{n: n, ns: fmt.Sprintf("src-ingress-%d", n), creators: envInt(t, "FLEETDNS_BENCH_CREATORS", 8)}
	k.EnsureNamespace(t, d.ns)
	cs := k.Clientset()
	start := time.Now()
	parallel(t, n, d.creators, func(ctx context.Context, i int) error {
		name := fmt.Sprintf("i%d", i)
		_, err := cs.CoreV1().Services(d.ns).Create(ctx, &corev1.Service{
			ObjectMeta: metav1.ObjectMeta{Name: name},
			Spec: corev1.ServiceSpec{
				Type: corev1.ServiceTypeClusterIP, ClusterIP: corev1.ClusterIPNone,
				Selector: map[string]string{"app": name},
				Ports:    []corev1.ServicePort{{Name: "http", Port: 80, TargetPort: intstr.FromInt32(8080)}},
			},
		}, metav1.CreateOptions{})
		if err != nil {
			return fmt.Errorf("create Service %s/%s: %w", d.ns, name, err)
		}
		if _, err := cs.DiscoveryV1().EndpointSlices(d.ns).Create(ctx, slice(d.ns, i, true), metav1.CreateOptions{}); err != nil {
			return fmt.Errorf("create EndpointSlice %s/%s: %w", d.ns, name, err)
		}
		prefix := networkingv1.PathTypePrefix
		ing, err := cs.NetworkingV1().Ingresses(d.ns).Create(ctx, &networkingv1.Ingress{
			ObjectMeta: metav1.ObjectMeta{Name: name},
			Spec: networkingv1.IngressSpec{Rules: []networkingv1.IngressRule{{
				Host: srcHost(i),
				IngressRuleValue: networkingv1.IngressRuleValue{HTTP: &networkingv1.HTTPIngressRuleValue{
					Paths: []networkingv1.HTTPIngressPath{{Path: "/", PathType: &prefix, Backend: networkingv1.IngressBackend{
						Service: &networkingv1.IngressServiceBackend{Name: name, Port: networkingv1.ServiceBackendPort{Number: 80}},
					}}},
				}},
			}}},
		}, metav1.CreateOptions{})
		if err != nil {
			return fmt.Errorf("create Ingress %s/%s: %w", d.ns, name, err)
		}
		ing.Status.LoadBalancer.Ingress = []networkingv1.IngressLoadBalancerIngress{{IP: srcLB(i)}}
		if _, err := cs.NetworkingV1().Ingresses(d.ns).UpdateStatus(ctx, ing, metav1.UpdateOptions{}); err != nil {
			return fmt.Errorf("Ingress %s/%s status: %w", d.ns, name, err)
		}
		return nil
	})
	d.created, d.calls = time.Since(start), 4*n
	t.Logf("created %d Services, EndpointSlices and Ingresses (+ status) in %s in %v with %d parallel clients (load %s)",
		n, d.ns, d.created.Round(time.Millisecond), d.creators, loadavg())
	return d
}

// slice is the EndpointSlice of Service i: one endpoint, ready or not, as
// the endpointslice controller writes it.
func slice(ns string, i int, ready bool) *discoveryv1.EndpointSlice {
	name := fmt.Sprintf("i%d", i)
	port, proto, portName := int32(8080), corev1.ProtocolTCP, "http"
	return &discoveryv1.EndpointSlice{
		ObjectMeta: metav1.ObjectMeta{Name: name + "-ep", Namespace: ns, Labels: map[string]string{
			discoveryv1.LabelServiceName: name,
			discoveryv1.LabelManagedBy:   "endpointslice-controller.k8s.io",
		}},
		AddressType: discoveryv1.AddressTypeIPv4,
		Endpoints: []discoveryv1.Endpoint{{
			Addresses:  []string{srcPod(i)},
			Conditions: discoveryv1.EndpointConditions{Ready: &ready},
		}},
		Ports: []discoveryv1.EndpointPort{{Name: &portName, Port: &port, Protocol: &proto}},
	}
}

// loadHostEndpoints creates the same n hosts as DNSEndpoints, one A
// endpoint per object with the Ingress's load balancer address.
func loadHostEndpoints(t *testing.T, k *harness.Kube, n int) *srcData {
	t.Helper()
	d := &srcData{n: n, ns: fmt.Sprintf("src-dnsendpoint-%d", n), creators: envInt(t, "FLEETDNS_BENCH_CREATORS", 8)}
	k.EnsureNamespace(t, d.ns)
	start := time.Now()
	parallel(t, n, d.creators, func(ctx context.Context, i int) error {
		_, err := k.TryCreate(ctx, harness.DNSEndpointObject(d.ns, fmt.Sprintf("i%d", i), nil,
			harness.Endpoint{DNSName: srcHost(i), RecordType: "A", Targets: []string{srcLB(i)}}))
		return err
	})
	d.created, d.calls = time.Since(start), n
	t.Logf("created %d DNSEndpoints in %s in %v with %d parallel clients (load %s)",
		n, d.ns, d.created.Round(time.Millisecond), d.creators, loadavg())
	return d
}

// srcQueries writes a dnsperf query file of count A queries of the n hosts
// drawn uniformly (seeded), each with prefix before its first label.
func srcQueries(t *testing.T, n, count int, prefix string) string {
	t.Helper()
	r := rand.New(rand.NewPCG(uint64(n), 13))
	var b strings.Builder
	for range count {
		fmt.Fprintf(&b, "%s%s A\n", prefix, srcHost(r.IntN(n)))
	}
	p := filepath.Join(t.TempDir(), fmt.Sprintf("queries-src%s-%d.txt", strings.TrimSuffix(prefix, "-"), n))
	if err := os.WriteFile(p, []byte(b.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

// localAnswer asks addr for localtargets-<host> A and returns the rcode and targets.
func localAnswer(addr, host string) (int, []string, error) {
	m, q := harness.NewMsg("localtargets-"+host, dns.TypeA, harness.NoRD, harness.Timeout(200*time.Millisecond), harness.Attempts(1))
	r, err := harness.AskMsg(addr, m, q)
	if err != nil {
		return 0, nil, err
	}
	return r.Rcode, harness.Targets(r, dns.TypeA), nil
}

// shows reports whether a localtargets- answer is exactly want (nil: NODATA).
func shows(rcode int, got, want []string) bool {
	return rcode == dns.RcodeSuccess && slices.Equal(got, want)
}

// startSources starts coredns with k8scrd serving kind from ns, with
// localtargets, pinned to cpu (when set), and returns it with the time from
// exec until the last host's localtargets- answer carries its target.
func startSources(t *testing.T, k *harness.Kube, ip, cpu, kind string, d *srcData) (*server, time.Duration) {
	t.Helper()
	return startSourcesBin(t, harness.CoreDNSBinary(t), k, ip, cpu, kind, d)
}

// startSourcesBin is startSources with the coredns binary bin.
func startSourcesBin(t *testing.T, bin string, k *harness.Kube, ip, cpu, kind string, d *srcData) (*server, time.Duration) {
	t.Helper()
	start := time.Now()
	s := startServerBin(t, bin, ip, cpu, fmt.Sprintf("k8scrd {\n        kubeconfig %s\n        namespaces %s\n        resources %s\n    }\n    localtargets",
		k.Kubeconfig, d.ns, kind))
	last := d.n - 1
	for {
		rc, got, err := localAnswer(s.addr, srcHost(last))
		if err == nil && shows(rc, got, []string{srcLB(last)}) {
			break
		}
		if time.Since(start) > 3*time.Minute {
			t.Fatalf("%s: localtargets-%s = %s %v (%v) 3 minutes after start\n%s", kind, srcHost(last), dns.RcodeToString[rc], got, err, s.Log())
		}
		time.Sleep(2 * time.Millisecond)
	}
	lastHost := time.Since(start)
	for _, i := range []int{0, d.n / 2, last} {
		got, err := answerA(s.addr, srcHost(i))
		if err != nil || !slices.Equal(got, []string{srcLB(i)}) {
			t.Fatalf("%s: %s A = %v (%v), want %s", kind, srcHost(i), got, err, srcLB(i))
		}
	}
	return s, lastHost
}

// srcSample is one server start in one round.
type srcSample struct {
	ready, lastHost time.Duration
	rss             int64
	mem, loaded     memory           // 2 s after the last host answers; after the dnsperf runs
	live            map[string]int64 // MemStats after a collection, after mem (with FLEETDNS_BENCH_PPROF)
	plain, local    perf             // dnsperf: A queries of the hosts, of localtargets-<host>
}

// variant is one server of a round: a source kind served by one binary,
// the one under test or, with FLEETDNS_BENCH_BASE, the one to compare with.
type variant struct {
	kind, bin string
	base      bool
}

func (v variant) String() string {
	if v.base {
		return v.kind + " (base)"
	}
	return v.kind
}

// change is one measured change: from the start of the update call to the
// first localtargets- answer that shows it.
type change struct {
	total, call time.Duration
}

// TestSourcesScale measures k8scrd serving 10,000 hosts derived from
// Ingresses (FLEETDNS_BENCH_SOURCES; one host each, its backend Service's
// EndpointSlice for health, its status address for targets) through a real
// kube-apiserver, beside the same hosts written as 10,000 DNSEndpoints:
// start to ready, start to the last host's localtargets- answer, RSS, and
// dnsperf q/s and CPU per query for plain A queries and for localtargets-
// queries, the two servers alternating over FLEETDNS_BENCH_ROUNDS rounds.
// Then the delay from an EndpointSlice readiness change (ready false, then
// true again) to the localtargets- answer that shows it, over
// FLEETDNS_BENCH_SOURCE_CHANGES changes (default 200), and, as the
// yardstick, the same for a DNSEndpoint whose target changes.
func TestSourcesScale(t *testing.T) {
	needBench(t)
	harness.LookPath(t, "dnsperf")
	n := envInt(t, "FLEETDNS_BENCH_SOURCES", 10000)
	changes := envInt(t, "FLEETDNS_BENCH_SOURCE_CHANGES", 200)
	rounds := envInt(t, "FLEETDNS_BENCH_ROUNDS", 3)
	seconds := envInt(t, "FLEETDNS_BENCH_SECONDS", 10)
	if n < 2 || n > 32000 || changes < 2 || rounds < 1 {
		// 32,000 hosts: srcAlt's addresses stay inside 198.19.0.0/16.
		t.Fatalf("FLEETDNS_BENCH_SOURCES=%d, FLEETDNS_BENCH_SOURCE_CHANGES=%d, FLEETDNS_BENCH_ROUNDS=%d: want 2-32000, at least 2 and at least 1", n, changes, rounds)
	}
	const queries = 100000
	k := harness.SharedKube(t)
	serverCPU, loadCPU := pinning()
	loads := []string{loadavg()}

	kinds := []string{"Ingress", "DNSEndpoint"}
	data := map[string]*srcData{"Ingress": loadIngresses(t, k, n), "DNSEndpoint": loadHostEndpoints(t, k, n)}
	loads = append(loads, loadavg())
	plainQ, localQ := srcQueries(t, n, queries, ""), srcQueries(t, n, queries, "localtargets-")
	ip := harness.NewIP(t)
	// Warm-up: one unmeasured start of each, so that the first measured
	// start does not also pay for the API server's cold caches.
	for _, kind := range kinds {
		s, _ := startSources(t, k, ip, serverCPU, kind, data[kind])
		s.Stop()
	}

	// With FLEETDNS_BENCH_BASE (a coredns binary built at the commit to
	// compare with), every round also starts that binary on both data sets,
	// next to the one under test, in the same order.
	var variants []variant
	bin, base := harness.CoreDNSBinary(t), os.Getenv("FLEETDNS_BENCH_BASE")
	for _, kind := range kinds {
		if base != "" {
			variants = append(variants, variant{kind: kind, bin: base, base: true})
		}
		variants = append(variants, variant{kind: kind, bin: bin})
	}
	samples := map[variant][]srcSample{}
	var qpsRatio, localRatio, cpuRatio, rssRatio, readyRatio []float64 // Ingress over DNSEndpoint, per round
	for r := range rounds {
		order := slices.Clone(variants)
		if r%2 == 1 {
			slices.Reverse(order)
		}
		got := map[variant]srcSample{}
		for _, v := range order {
			s, lastHost := startSourcesBin(t, v.bin, k, ip, serverCPU, v.kind, data[v.kind])
			time.Sleep(2 * time.Second) // let the post-sync garbage be collected before reading RSS
			mem := s.readMemory(t)
			s.saveHeap(t, fmt.Sprintf("%s-%d", strings.ReplaceAll(strings.ReplaceAll(v.String(), " ", "-"), "(base)", "base"), r+1))
			var live map[string]int64
			if s.pprof != "" {
				live = s.memStats(t, true)
			}
			smp := srcSample{ready: s.ready, lastHost: lastHost, rss: mem.rss, mem: mem, live: live,
				plain: dnsperf(t, s, plainQ, loadCPU, seconds), local: dnsperf(t, s, localQ, loadCPU, seconds)}
			smp.loaded = s.readMemory(t)
			s.Stop()
			got[v] = smp
			samples[v] = append(samples[v], smp)
			t.Logf("round %d: %-18s ready %v, last host %v, RSS %.1f MiB, A %.0f q/s %.1f us/q, localtargets- %.0f q/s %.1f us/q (load %s)\n\tat 2 s: %v\n\tlive heap after a collection %.1f MiB, in use %.1f MiB\n\tafter dnsperf: %v",
				r+1, v, s.ready.Round(time.Millisecond), lastHost.Round(time.Millisecond), float64(mem.rss)/(1<<20),
				smp.plain.qps, smp.plain.usPerQ, smp.local.qps, smp.local.usPerQ, loadavg(), mem, float64(live["HeapAlloc"])/(1<<20), float64(live["HeapInuse"])/(1<<20), smp.loaded)
		}
		ing, dep := got[variant{kind: "Ingress", bin: bin}], got[variant{kind: "DNSEndpoint", bin: bin}]
		qpsRatio = append(qpsRatio, ing.plain.qps/dep.plain.qps)
		localRatio = append(localRatio, ing.local.qps/dep.local.qps)
		cpuRatio = append(cpuRatio, ing.plain.usPerQ/dep.plain.usPerQ)
		rssRatio = append(rssRatio, float64(ing.rss)/float64(dep.rss))
		readyRatio = append(readyRatio, ing.lastHost.Seconds()/dep.lastHost.Seconds())
		loads = append(loads, loadavg())
	}

	// Health: EndpointSlice readiness flips against DNSEndpoint target changes.
	health := measureReadiness(t, k, data["Ingress"], changes)
	loads = append(loads, loadavg())
	yard := measureTargetChange(t, k, data["DNSEndpoint"], changes)
	loads = append(loads, loadavg())

	var b strings.Builder
	fmt.Fprintf(&b, "\n### Ingress hosts against DNSEndpoint hosts at %d through a real kube-apiserver (%s)\n\n", n, time.Now().UTC().Format("2006-01-02 15:04 MST"))
	fmt.Fprintf(&b, "%s Load average (1/5/15 min) before the creates, after them, at each round boundary and after each change run: %s.\n\n", machine(), strings.Join(loads, " | "))
	fmt.Fprintf(&b, "Command: `FLEETDNS_BENCH=1 FLEETDNS_BENCH_SOURCES=%d FLEETDNS_BENCH_SOURCE_CHANGES=%d FLEETDNS_BENCH_ROUNDS=%d FLEETDNS_BENCH_SECONDS=%d go test -count=1 -v -timeout 60m -run TestSourcesScale ./test/bench/scale`\n\n",
		n, changes, rounds, seconds)
	if base != "" {
		fmt.Fprintf(&b, "With `FLEETDNS_BENCH_BASE=%s`: every round also starts that binary (base) on both data sets, next to %s.\n\n", base, bin)
	}
	b.WriteString("Data (created before any server starts; not part of ready):\n\n| source | objects | API calls | created in | parallel clients |\n|---|---|---:|---:|---:|\n")
	fmt.Fprintf(&b, "| Ingress | %d Ingresses (one host, status IP via UpdateStatus), %[1]d headless Services, %[1]d EndpointSlices (one ready endpoint) | %d | %.1f s | %d |\n",
		n, data["Ingress"].calls, data["Ingress"].created.Seconds(), data["Ingress"].creators)
	fmt.Fprintf(&b, "| DNSEndpoint | %d DNSEndpoints (one A endpoint: the same host and address) | %d | %.1f s | %d |\n\n",
		n, data["DNSEndpoint"].calls, data["DNSEndpoint"].created.Seconds(), data["DNSEndpoint"].creators)
	fmt.Fprintf(&b, "Corefile: `scale.bench { k8scrd { kubeconfig K; namespaces NS; resources Ingress|DNSEndpoint }; localtargets; ready }`, no health checks. coredns pinned to CPU %q with taskset (GOMAXPROCS=1), dnsperf to CPU %q (`-c 10 -T 1`, %d s per run); kube-apiserver and etcd unpinned. %d rounds, server order swapped each round, one unmeasured start of each first. Ready = exec until `ready` says 200 and the SOA answers; last host = exec until `localtargets-<last host>` answers its address (polled every 2 ms). RSS (VmRSS) 2 s after that. Query files: %d A queries of the %d hosts drawn uniformly, and the same hosts as `localtargets-<host>`; the same files for both servers.\n\n",
		serverCPU, loadCPU, seconds, rounds, queries, n)
	b.WriteString("| source | ready s median (min-max) | last host s median (min-max) | RSS MiB median (min-max) | A q/s median (min-max) | A CPU us/query | localtargets- q/s median (min-max) | localtargets- CPU us/query | lost % max |\n|---|---|---|---|---|---|---|---|---:|\n")
	for _, v := range variants {
		var ready, last, rss, qps, us, lq, lus []float64
		lost := 0.0
		for _, s := range samples[v] {
			ready = append(ready, s.ready.Seconds())
			last = append(last, s.lastHost.Seconds())
			rss = append(rss, float64(s.rss)/(1<<20))
			qps, us = append(qps, s.plain.qps), append(us, s.plain.usPerQ)
			lq, lus = append(lq, s.local.qps), append(lus, s.local.usPerQ)
			lost = max(lost, s.plain.lost, s.local.lost)
		}
		fmt.Fprintf(&b, "| %s | %s | %s | %s | %s | %s | %s | %s | %.2f |\n", v,
			benchkit.StatOf(ready).Format("%.2f"), benchkit.StatOf(last).Format("%.2f"), benchkit.StatOf(rss).Format("%.0f"),
			benchkit.StatOf(qps).Format("%.0f"), benchkit.StatOf(us).Format("%.1f"), benchkit.StatOf(lq).Format("%.0f"), benchkit.StatOf(lus).Format("%.1f"), lost)
	}
	b.WriteString("\nIngress over DNSEndpoint, per round (median (min-max)):\n\n| A q/s | localtargets- q/s | A CPU/query | RSS | start to last host |\n|---|---|---|---|---|\n")
	fmt.Fprintf(&b, "| %s | %s | %s | %s | %s |\n", benchkit.StatOf(qpsRatio).Format("%.2f"), benchkit.StatOf(localRatio).Format("%.2f"),
		benchkit.StatOf(cpuRatio).Format("%.2f"), benchkit.StatOf(rssRatio).Format("%.2f"), benchkit.StatOf(readyRatio).Format("%.2f"))
	perHost(&b, samples, variants, n)

	fmt.Fprintf(&b, "\nA change -> the `localtargets-<host>` answer that shows it, with all %d hosts served (one client, one change at a time, on hosts spread over the set; polled over UDP every 2 ms from the start of the update call; server not pinned):\n\n", n)
	b.WriteString("| change | changes | p50 | p90 | p99 | max | update call p50 / p99 | goal p99 < 250 ms |\n|---|---:|---:|---:|---:|---:|---|---|\n")
	ms := func(d time.Duration) string { return fmt.Sprintf("%.1f ms", float64(d)/float64(time.Millisecond)) }
	row := func(what string, cs []change, goal bool) bool {
		var total, call []time.Duration
		for _, c := range cs {
			total, call = append(total, c.total), append(call, c.call)
		}
		p99 := percentile(total, .99)
		ok := p99 < healthGoal
		verdict := "(yardstick)"
		if goal {
			verdict = met(ok)
		}
		fmt.Fprintf(&b, "| %s | %d | %s | %s | %s | %s | %s / %s | %s |\n", what, len(total), ms(percentile(total, .5)), ms(percentile(total, .9)),
			ms(p99), ms(slices.Max(total)), ms(percentile(call, .5)), ms(percentile(call, .99)), verdict)
		return ok
	}
	ok := row("EndpointSlice `conditions.ready` false/true (Ingress host: NODATA / its address)", health, true)
	row("DNSEndpoint target changed (the answer: the new address)", yard, false)
	report(t, b.String())
	if !ok && strict() {
		t.Errorf("readiness change p99 over %v (FLEETDNS_BENCH_STRICT=1)", healthGoal)
	}
}

// spread is the host of change c: pairs of changes (withdraw, restore) on
// hosts spread over the data set.
func spread(c, n int) int { return (c / 2 * 7919) % n }

// measureReadiness starts a server on the Ingress data set and flips the
// EndpointSlice readiness of hosts, one change at a time: false (the
// localtargets- answer goes NODATA) then true (its address again).
func measureReadiness(t *testing.T, k *harness.Kube, d *srcData, changes int) []change {
	t.Helper()
	s, _ := startSources(t, k, harness.NewIP(t), "", "Ingress", d)
	defer s.Stop()
	es := k.Clientset().DiscoveryV1().EndpointSlices(d.ns)
	var out []change
	for c := range changes {
		i, ready := spread(c, d.n), c%2 == 1
		var want []string
		if ready {
			want = []string{srcLB(i)}
		}
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		cur, err := es.Get(ctx, fmt.Sprintf("i%d-ep", i), metav1.GetOptions{})
		if err != nil {
			cancel()
			t.Fatal(err)
		}
		cur.Endpoints[0].Conditions.Ready = &ready
		start := time.Now()
		_, err = es.Update(ctx, cur, metav1.UpdateOptions{})
		call := time.Since(start)
		cancel()
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, change{total: waitShows(t, s, i, want, start), call: call})
	}
	t.Logf("EndpointSlice readiness -> localtargets-: %d changes, p50 %v, p99 %v (load %s)", len(out),
		percentile(totals(out), .5).Round(100*time.Microsecond), percentile(totals(out), .99).Round(100*time.Microsecond), loadavg())
	return out
}

// measureTargetChange is the yardstick: the DNSEndpoint data set, each
// change moving a host's target to another address and back.
func measureTargetChange(t *testing.T, k *harness.Kube, d *srcData, changes int) []change {
	t.Helper()
	s, _ := startSources(t, k, harness.NewIP(t), "", "DNSEndpoint", d)
	defer s.Stop()
	ri := k.Dynamic().Resource(harness.DNSEndpointGVR).Namespace(d.ns)
	var out []change
	for c := range changes {
		i := spread(c, d.n)
		want := []string{srcAlt(i)}
		if c%2 == 1 {
			want = []string{srcLB(i)}
		}
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		cur, err := ri.Get(ctx, fmt.Sprintf("i%d", i), metav1.GetOptions{})
		if err != nil {
			cancel()
			t.Fatal(err)
		}
		obj := harness.DNSEndpointObject(d.ns, cur.GetName(), nil, harness.Endpoint{DNSName: srcHost(i), RecordType: "A", Targets: want})
		cur.Object["spec"] = obj.Object["spec"]
		start := time.Now()
		_, err = ri.Update(ctx, cur, metav1.UpdateOptions{FieldManager: harness.FieldManager})
		call := time.Since(start)
		cancel()
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, change{total: waitShows(t, s, i, want, start), call: call})
	}
	t.Logf("DNSEndpoint target -> localtargets-: %d changes, p50 %v, p99 %v (load %s)", len(out),
		percentile(totals(out), .5).Round(100*time.Microsecond), percentile(totals(out), .99).Round(100*time.Microsecond), loadavg())
	return out
}

// waitShows polls localtargets-<host i> every 2 ms until it answers want
// (nil: NODATA) and returns the time since start; answerWithin bounds it.
func waitShows(t *testing.T, s *server, i int, want []string, start time.Time) time.Duration {
	t.Helper()
	for {
		rc, got, err := localAnswer(s.addr, srcHost(i))
		if err == nil && shows(rc, got, want) {
			return time.Since(start)
		}
		if time.Since(start) > answerWithin {
			t.Fatalf("localtargets-%s = %s %v (%v) %v after the change, want NOERROR %v", srcHost(i), dns.RcodeToString[rc], got, err, answerWithin, want)
		}
		time.Sleep(pollEvery)
	}
}

func totals(cs []change) []time.Duration {
	out := make([]time.Duration, len(cs))
	for i, c := range cs {
		out[i] = c.total
	}
	return out
}

// perHost writes, for each binary, the memory an Ingress host costs over a
// DNSEndpoint host: the median over the rounds of the difference of the two
// servers' readings divided by the hosts. VmRSS counts the pages of the
// binary that each server happened to run (the Ingress server runs more
// code: the protobuf decoding of the core kinds); RssAnon is what the
// process allocated; VmHWM is the peak of start-up.
func perHost(b *strings.Builder, samples map[variant][]srcSample, variants []variant, n int) {
	b.WriteString("\nIngress host over DNSEndpoint host, KiB per host, median over rounds of the differences (min-max):\n\n| binary | VmRSS at 2 s | RssAnon at 2 s | VmHWM (start-up peak) | VmRSS after dnsperf | RssAnon after dnsperf | Go heap in use at 2 s | live heap |\n|---|---|---|---|---|---|---|---|\n")
	for _, v := range variants {
		if v.kind != "Ingress" {
			continue
		}
		ing, dep := samples[v], samples[variant{kind: "DNSEndpoint", bin: v.bin, base: v.base}]
		col := func(f func(srcSample) int64) string {
			var d []float64
			for i := range min(len(ing), len(dep)) {
				d = append(d, float64(f(ing[i])-f(dep[i]))/1024/float64(n))
			}
			return benchkit.StatOf(d).Format("%.2f")
		}
		name := "under test"
		if v.base {
			name = "base"
		}
		fmt.Fprintf(b, "| %s | %s | %s | %s | %s | %s | %s | %s |\n", name,
			col(func(s srcSample) int64 { return s.mem.rss }), col(func(s srcSample) int64 { return s.mem.anon }),
			col(func(s srcSample) int64 { return s.mem.hwm }), col(func(s srcSample) int64 { return s.loaded.rss }),
			col(func(s srcSample) int64 { return s.loaded.anon }), col(func(s srcSample) int64 { return s.mem.stats["HeapInuse"] }),
			col(func(s srcSample) int64 { return s.live["HeapAlloc"] }))
	}
}
