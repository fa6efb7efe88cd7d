package k8scrd

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/fleetdns/fleetdns/plugin/k8scrd/kubefeed"

	"github.com/coredns/caddy"
	"github.com/coredns/coredns/plugin/test"
	"github.com/fleetdns/fleetdns/internal/testkit"
	"github.com/fleetdns/fleetdns/plugin/k8scrd/object"
	"github.com/miekg/dns"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"sigs.k8s.io/external-dns/apis/v1alpha1"
)

// fakeAPI is a minimal API server for dnsendpoints: list, and watch streams
// fed by send. It is a fake for the unit tests; test/k8scrd runs the plugin
// against a real kube-apiserver.
type fakeAPI struct {
	mu       sync.Mutex
	items    []string // JSON objects returned by list
	rv       int
	status   int // when not 0, every request fails with it
	watchers []chan string
	requests []string
	srv      *httptest.Server
}

func newFakeAPI(t *testing.T, items ...string) *fakeAPI {
	f := &fakeAPI{items: items, rv: 10}
	f.srv = httptest.NewServer(http.HandlerFunc(f.serve))
	t.Cleanup(func() {
		f.mu.Lock()
		for _, w := range f.watchers {
			close(w)
		}
		f.watchers = nil
		f.mu.Unlock()
		f.srv.CloseClientConnections()
		f.srv.Close()
	})
	return f
}

func (f *fakeAPI) serve(w http.ResponseWriter, r *http.Request) {
	f.mu.Lock()
	f.requests = append(f.requests, r.URL.Path+"?"+r.URL.RawQuery)
	status := f.status
	f.mu.Unlock()
	w.Header().Set("Content-Type", "application/json")
	if status != 0 {
		w.WriteHeader(status)
		reason := map[int]string{403: "Forbidden", 503: "ServiceUnavailable"}[status]
		fmt.Fprintf(w, `{"kind":"Status","apiVersion":"v1","status":"Failure","reason":%q,"code":%d,"message":"dnsendpoints.externaldns.k8s.io is forbidden: User \"test\" cannot list resource \"dnsendpoints\""}`, reason, status)
		return
	}
	q := r.URL.Query()
	if q.Get("watch") == "true" {
		if q.Get("sendInitialEvents") == "true" {
			// No streaming lists here: the reflector falls back to list + watch.
			w.WriteHeader(http.StatusBadRequest)
			fmt.Fprint(w, `{"kind":"Status","apiVersion":"v1","status":"Failure","reason":"BadRequest","code":400}`)
			return
		}
		ch := make(chan string, 16)
		f.mu.Lock()
		f.watchers = append(f.watchers, ch)
		f.mu.Unlock()
		w.WriteHeader(http.StatusOK)
		w.(http.Flusher).Flush()
		for {
			select {
			case ev, ok := <-ch:
				if !ok {
					return
				}
				fmt.Fprintln(w, ev)
				w.(http.Flusher).Flush()
			case <-r.Context().Done():
				return
			}
		}
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	fmt.Fprintf(w, `{"apiVersion":"externaldns.k8s.io/v1alpha1","kind":"DNSEndpointList","metadata":{"resourceVersion":"%d"},"items":[%s]}`, f.rv, strings.Join(f.items, ","))
}

// send delivers a watch event to every open watch.
func (f *fakeAPI) send(typ, obj string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	for _, w := range f.watchers {
		w <- fmt.Sprintf(`{"type":%q,"object":%s}`, typ, obj)
	}
}

func (f *fakeAPI) watching() bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	return len(f.watchers) > 0
}

// apiObject renders a DNSEndpoint as the API server would return it.
func apiObject(ns, name string, rv int, changed time.Time, eps ...map[string]any) string {
	o := map[string]any{
		"apiVersion": "externaldns.k8s.io/v1alpha1", "kind": "DNSEndpoint",
		"metadata": map[string]any{
			"name": name, "namespace": ns, "resourceVersion": fmt.Sprint(rv), "uid": ns + "-" + name,
			"creationTimestamp": "2024-01-01T00:00:00Z",
			"managedFields": []any{map[string]any{"manager": "kubectl", "operation": "Apply",
				"time": changed.UTC().Format(time.RFC3339), "fieldsType": "FieldsV1", "fieldsV1": map[string]any{"f:spec": map[string]any{}}}},
		},
		"spec": map[string]any{"endpoints": eps},
	}
	b, _ := json.Marshal(o)
	return string(b)
}

func aEndpoint(name string, targets ...string) map[string]any {
	return testkit.EP(name, "A", 0, targets...).Object()
}

func startKubePlugin(t *testing.T, f *fakeAPI, body string) *K8sCRD {
	t.Helper()
	kc := filepath.Join(t.TempDir(), "kubeconfig")
	os.WriteFile(kc, []byte(`apiVersion: v1
kind: Config
clusters: [{name: fake, cluster: {server: "`+f.srv.URL+`"}}]
users: [{name: u, user: {token: t}}]
contexts: [{name: fake, context: {cluster: fake, user: u}}]
current-context: fake
`), 0o600)
	k, err := parse(caddy.NewTestController("dns", "k8scrd example.org {\n kubeconfig "+kc+" fake\n"+body+"\n}"))
	if err != nil {
		t.Fatal(err)
	}
	k.cfg.startupWait = 2 * time.Second
	k.Next = test.NextHandler(dns.RcodeRefused, nil)
	if err := k.start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { k.shutdown() })
	return k
}

func TestKubernetesSourceListWatchUpdateDelete(t *testing.T) {
	f := newFakeAPI(t, apiObject("web", "www", 5, time.Now(), aEndpoint("www.example.org", "192.0.2.10")))
	k := startKubePlugin(t, f, "namespaces web\nlabels app=web")
	if !k.Ready() {
		t.Fatal("not ready after the first list")
	}
	if !hasA(k, t, "www.example.org.", "192.0.2.10")() {
		t.Fatal("listed object not served")
	}
	testkit.Eventually(t, 5*time.Second, "watch open", f.watching)

	hBefore := histogramCount(t)
	f.send("MODIFIED", apiObject("web", "www", 11, time.Now(), aEndpoint("www.example.org", "192.0.2.11")))
	testkit.Eventually(t, 5*time.Second, "update served", hasA(k, t, "www.example.org.", "192.0.2.11"))
	f.send("ADDED", apiObject("web", "new", 12, time.Now(), aEndpoint("new.example.org", "192.0.2.12")))
	testkit.Eventually(t, 5*time.Second, "added object served", hasA(k, t, "new.example.org.", "192.0.2.12"))
	f.send("DELETED", apiObject("web", "new", 13, time.Now(), aEndpoint("new.example.org", "192.0.2.12")))
	testkit.Eventually(t, 5*time.Second, "deleted object gone", isNXDOMAIN(k, t, "new.example.org."))
	if n := histogramCount(t) - hBefore; n < 2 {
		t.Errorf("propagation delay observed %d times for 2 changes", n)
	}

	f.mu.Lock()
	reqs := strings.Join(f.requests, "\n")
	f.mu.Unlock()
	if !strings.Contains(reqs, "/apis/externaldns.k8s.io/v1alpha1/namespaces/web/dnsendpoints?") {
		t.Errorf("namespaces web: requests went to\n%s", reqs)
	}
	if !strings.Contains(reqs, "labelSelector=app%3Dweb") {
		t.Errorf("labels app=web: no label selector in\n%s", reqs)
	}
}

func histogramCount(t *testing.T) uint64 {
	t.Helper()
	return uint64(metricValue(t, "coredns_k8scrd_propagation_delay_seconds"))
}

func TestKubernetesForbiddenIsCountedAndServfail(t *testing.T) {
	f := newFakeAPI(t)
	f.status = http.StatusForbidden
	before := testutil.ToFloat64(object.SyncErrors.WithLabelValues("kubernetes"))
	k := startKubePlugin(t, f, "")
	if k.Ready() {
		t.Fatal("ready without a single successful list")
	}
	if testutil.ToFloat64(object.SyncErrors.WithLabelValues("kubernetes")) <= before {
		t.Error("403 not counted in coredns_k8scrd_sync_errors_total")
	}
	if _, code := ask(t, k, "www.example.org.", dns.TypeA); code != dns.RcodeServerFailure {
		t.Errorf("before the first sync: %s, want SERVFAIL", dns.RcodeToString[code])
	}
	// Permission granted later: the next retry syncs.
	f.mu.Lock()
	f.status = 0
	f.items = []string{apiObject("web", "www", 5, time.Now(), aEndpoint("www.example.org", "192.0.2.10"))}
	f.mu.Unlock()
	testkit.Within(15*time.Second, k.Ready)
	if !k.Ready() || !hasA(k, t, "www.example.org.", "192.0.2.10")() {
		t.Error("not serving after the API server allowed the list")
	}
}

func TestKubernetesKeepsServingWhileAPIServerAway(t *testing.T) {
	f := newFakeAPI(t, apiObject("web", "www", 5, time.Now(), aEndpoint("www.example.org", "192.0.2.10")))
	k := startKubePlugin(t, f, "")
	testkit.Eventually(t, 5*time.Second, "watch open", f.watching)
	f.mu.Lock()
	f.status = http.StatusServiceUnavailable
	for _, w := range f.watchers {
		close(w)
	}
	f.watchers = nil
	f.mu.Unlock()
	f.srv.CloseClientConnections()
	time.Sleep(300 * time.Millisecond)
	if !hasA(k, t, "www.example.org.", "192.0.2.10")() {
		t.Error("data lost while the API server is away")
	}
}

func TestKubernetesTransformStripsManagedFieldsKeepsChangeTime(t *testing.T) {
	cfg := newConfig()
	cfg.Zones = []string{"example.org."}
	src := kubefeed.New(cfg.feedConfig(), nil)
	var ep v1alpha1.DNSEndpoint
	changed := time.Date(2025, 5, 1, 12, 0, 3, 0, time.UTC)
	if err := json.Unmarshal([]byte(apiObject("web", "www", 7, changed, aEndpoint("www.example.org", "192.0.2.1"))), &ep); err != nil {
		t.Fatal(err)
	}
	ep.Annotations = map[string]string{"kubectl.kubernetes.io/last-applied-configuration": "{...}", "keep": "me"}
	out, err := src.Transform(&ep)
	if err != nil {
		t.Fatal(err)
	}
	got := out.(*kubefeed.Cached)
	if len(got.ManagedFields) != 0 || len(got.Annotations) != 0 || got.Name != "www" || got.Namespace != "web" || got.ResourceVersion != "7" {
		t.Errorf("transform kept %+v", got.ObjectMeta)
	}
	if !got.Obj.Changed.Equal(changed) {
		t.Errorf("change time %v, want the managedFields time %v", got.Obj.Changed, changed)
	}
	if len(got.Obj.At("www.example.org.")) != 1 {
		t.Errorf("converted object %+v, want the one endpoint at www.example.org.", got.Obj)
	}
	if again, _ := src.Transform(out); again != out {
		t.Error("transform is not idempotent")
	}
}

// BenchmarkKubernetesHeap measures the live heap that the kubernetes source
// holds per endpoint (informer cache, builder index and snapshot), at the
// margin between 1,000 and 100,000 endpoints in objects of 100, the shape of
// test/bench/scale. It is the in-process view of that test's RSS per endpoint.
func BenchmarkKubernetesHeap(b *testing.B) {
	live := func(endpoints int) uint64 {
		var items []string
		for i := range endpoints / 100 {
			eps := make([]map[string]any, 100)
			for j := range eps {
				eps[j] = aEndpoint(fmt.Sprintf("h%d.o%d.example.org", j, i), fmt.Sprintf("10.%d.%d.%d", i/256, i%256, j+1))
			}
			items = append(items, apiObject("scale", fmt.Sprintf("o%d", i), 100+i, time.Unix(1700000000, 0), eps...))
		}
		t := &testing.T{}
		f := newFakeAPI(t, items...)
		before := liveHeap()
		k := startKubePlugin(t, f, "")
		for deadline := time.Now().Add(time.Minute); !k.Ready() && time.Now().Before(deadline); {
			time.Sleep(10 * time.Millisecond)
		}
		if !k.Ready() {
			b.Fatal("no first sync within a minute")
		}
		after := liveHeap()
		k.shutdown()
		f.srv.Close()
		return after - before
	}
	for b.Loop() {
		small, large := live(1000), live(100000)
		b.ReportMetric(float64(large-small)/99000, "B/endpoint")
	}
}

func liveHeap() uint64 {
	var ms runtime.MemStats
	runtime.GC()
	runtime.GC()
	runtime.ReadMemStats(&ms)
	return ms.HeapAlloc
}
