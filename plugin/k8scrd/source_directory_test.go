package k8scrd

import (
	"bytes"
	golog "log"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/fleetdns/fleetdns/plugin/k8scrd/derive"
	"github.com/fleetdns/fleetdns/plugin/k8scrd/dirfeed"
	"github.com/fleetdns/fleetdns/plugin/k8scrd/object"

	"github.com/fleetdns/fleetdns/plugin/k8scrd/object/objecttest"

	"github.com/coredns/caddy"
	"github.com/fleetdns/fleetdns/internal/testkit"
	"github.com/miekg/dns"
	"github.com/prometheus/client_golang/prometheus/testutil"
)

// ingressYAML is an Ingress in namespace web routing host to Service svc,
// its load balancer at the status IPs given.
func ingressYAML(name, host, svc string, ips ...string) string {
	s := `apiVersion: networking.k8s.io/v1
kind: Ingress
metadata:
  name: ` + name + `
  namespace: web
spec:
  rules:
  - host: ` + host + `
    http:
      paths:
      - path: /
        pathType: Prefix
        backend:
          service:
            name: ` + svc + `
            port: {number: 80}
status:
  loadBalancer:
    ingress:
`
	for _, ip := range ips {
		s += "    - ip: \"" + ip + "\"\n"
	}
	return s
}

// sliceYAML is an EndpointSlice of Service web/svc with one endpoint (the
// address is data, never contacted).
func sliceYAML(name, svc string, ready bool) string {
	r := "true"
	if !ready {
		r = "false"
	}
	return `apiVersion: discovery.k8s.io/v1
kind: EndpointSlice
metadata:
  name: ` + name + `
  namespace: web
  labels: {kubernetes.io/service-name: ` + svc + `}
addressType: IPv4
endpoints:
- addresses: [10.1.2.3]
  conditions: {ready: ` + r + `}
`
}

// directoryOnly parses a block on a folder holding files and reads it once,
// with the builder not running: what the directory hands the builder stays
// in its queue, for handed to take.
func directoryOnly(t *testing.T, body string, files map[string]string) (*dirfeed.Feed, *objecttest.Sink, string) {
	t.Helper()
	dir := t.TempDir()
	for name, content := range files {
		writeFile(t, dir, name, content)
	}
	c := caddy.NewTestController("dns", "k8scrd example.org {\n directory "+dir+"\n"+body+"\n}")
	k, err := parse(c)
	if err != nil {
		t.Fatalf("parse: %v", err)
	}
	d := k.source.(*dirfeed.Feed)
	rec := &objecttest.Sink{}
	d.B = rec
	d.Rescan()
	return d, rec, dir
}

// handed takes what the directory handed the builder since the last call:
// key -> object, nil for a removal.
func handed(b *objecttest.Sink) map[string]*object.Object { return b.Take() }

// unready reports whether o holds endpoints at name and all of them are
// marked unready (health withdraws them from localtargets and gslb).
func unready(o *object.Object, name string) (declared, marked bool) {
	marked = true
	for _, e := range o.Endpoints {
		if e.Name != name {
			continue
		}
		declared = true
		marked = marked && e.Extra != nil && e.Extra.Unready
	}
	return declared, declared && marked
}

func TestDirectoryIngressServedAndHealthFollowsTheSlice(t *testing.T) {
	k, dir := newTestPlugin(t, "example.org", zoneBody+"\nresources DNSEndpoint Ingress", map[string]string{
		"ingress.yaml": ingressYAML("shop", "shop.example.org", "shop", "192.0.2.10"),
		"slice.yaml":   sliceYAML("shop-1", "shop", true),
		"dnsep.yaml":   testkit.DNSEndpoint("web", "plain", nil, testkit.EP("plain.example.org", "A", 0, "192.0.2.1")),
	})
	resp, _ := ask(t, k, "shop.example.org.", dns.TypeA)
	if resp == nil || resp.Rcode != dns.RcodeSuccess || answers(resp) != "shop.example.org.\t30\tIN\tA\t192.0.2.10" {
		t.Fatalf("Ingress host: want its status address, got\n%v", resp)
	}
	if !hasA(k, t, "plain.example.org.", "192.0.2.1")() {
		t.Error("DNSEndpoint beside the Ingress not served")
	}

	// The slice turns unready: the zone's own answer keeps the address.
	swaps := k.builder.Swaps()
	write(t, filepath.Join(dir, "slice.yaml"), sliceYAML("shop-1", "shop", false))
	testkit.Eventually(t, 5*time.Second, "the slice's change applied", func() bool { return k.builder.Swaps() > swaps })
	if !hasA(k, t, "shop.example.org.", "192.0.2.10")() {
		t.Error("unready Ingress host: the plain A answer must keep the status address")
	}

	// The Ingress's file removed: the host goes.
	if err := os.Remove(filepath.Join(dir, "ingress.yaml")); err != nil {
		t.Fatal(err)
	}
	testkit.Eventually(t, 5*time.Second, "removed Ingress dropped", isNXDOMAIN(k, t, "shop.example.org."))
}

func TestDirectoryDerivedUnreadyAndOnlyWhatChanged(t *testing.T) {
	d, b, dir := directoryOnly(t, "resources Ingress", map[string]string{
		"ingress.yaml": ingressYAML("shop", "shop.example.org", "shop", "192.0.2.10") + "---\n" +
			ingressYAML("blog", "blog.example.org", "blog", "192.0.2.11"),
		"slice.yaml": sliceYAML("shop-1", "shop", true) + "---\n" + sliceYAML("blog-1", "blog", true),
	})
	shopKey := "file:ingress.yaml#" + derive.SourceKey(object.KindIngress, "web", "shop")
	blogKey := "file:ingress.yaml#" + derive.SourceKey(object.KindIngress, "web", "blog")
	got := handed(b)
	if len(got) != 2 || got[shopKey] == nil || got[blogKey] == nil {
		t.Fatalf("first read: want both Ingresses, got %v", keys(got))
	}
	if decl, marked := unready(got[shopKey], "shop.example.org."); !decl || marked {
		t.Fatalf("ready slice: shop.example.org declared %v, marked unready %v", decl, marked)
	}

	// shop's slice turns unready: only shop is handed over again, marked.
	write(t, filepath.Join(dir, "slice.yaml"), sliceYAML("shop-1", "shop", false)+"---\n"+sliceYAML("blog-1", "blog", true))
	d.Load("slice.yaml")
	got = handed(b)
	if len(got) != 1 || got[shopKey] == nil {
		t.Fatalf("slice change: want only %s handed over, got %v", shopKey, keys(got))
	}
	if decl, marked := unready(got[shopKey], "shop.example.org."); !decl || !marked {
		t.Errorf("unready slice: shop.example.org declared %v, marked unready %v; want both", decl, marked)
	}
	if len(got[shopKey].Endpoints) == 0 || len(got[shopKey].Endpoints[0].Addrs) != 1 || got[shopKey].Endpoints[0].Addrs[0].String() != "192.0.2.10" {
		t.Errorf("unready host keeps its targets, got %+v", got[shopKey].Endpoints)
	}

	// A file that changes nothing derived (a comment) hands nothing over.
	write(t, filepath.Join(dir, "slice.yaml"), "# health\n"+sliceYAML("shop-1", "shop", false)+"---\n"+sliceYAML("blog-1", "blog", true))
	d.Load("slice.yaml")
	if got = handed(b); len(got) != 0 {
		t.Errorf("no derived change: want nothing handed over, got %v", keys(got))
	}

	// The slices' file removed: both lose their health; the Ingresses' file removed: both go.
	os.Remove(filepath.Join(dir, "slice.yaml"))
	d.Load("slice.yaml")
	if got = handed(b); len(got) != 1 || got[blogKey] == nil {
		t.Errorf("slices removed: want only blog handed over (shop was unready already), got %v", keys(got))
	}
	os.Remove(filepath.Join(dir, "ingress.yaml"))
	d.Load("ingress.yaml")
	got = handed(b)
	if o, ok := got[shopKey]; len(got) != 2 || !ok || o != nil || got[blogKey] != nil {
		t.Errorf("Ingresses' file removed: want both removed, got %v", got)
	}
}

func keys(m map[string]*object.Object) []string {
	var out []string
	for k := range m {
		out = append(out, k)
	}
	return out
}

// syncBuffer collects log output written from the watch goroutine.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

func captureLog(t *testing.T) *syncBuffer {
	buf := &syncBuffer{}
	golog.SetOutput(buf)
	t.Cleanup(func() { golog.SetOutput(os.Stderr) })
	return buf
}

func TestDirectoryBadAddressSkippedWithOneLogLine(t *testing.T) {
	logs := captureLog(t)
	before := testutil.ToFloat64(object.InvalidEndpoints.WithLabelValues(object.ReasonSource))
	k, dir := newTestPlugin(t, "example.org", zoneBody+"\nresources Ingress", map[string]string{
		"slice.yaml": sliceYAML("shop-1", "shop", true),
		"ingress.yaml": ingressYAML("ok", "ok.example.org", "shop", "192.0.2.12") + "---\n" +
			ingressYAML("shop", "shop.example.org", "shop", "192.0.2.10", "not-an-ip"),
	})
	resp, _ := ask(t, k, "shop.example.org.", dns.TypeA)
	if resp == nil || answers(resp) != "shop.example.org.\t30\tIN\tA\t192.0.2.10" {
		t.Errorf("the rest of the Ingress: want 192.0.2.10 served, got\n%v", resp)
	}
	if !hasA(k, t, "ok.example.org.", "192.0.2.12")() {
		t.Error("the other Ingress of the file not served")
	}
	if d := testutil.ToFloat64(object.InvalidEndpoints.WithLabelValues(object.ReasonSource)) - before; d != 1 {
		t.Errorf("object.InvalidEndpoints{reason=source} rose by %v, want 1", d)
	}
	// Derived again (another file changed): not logged again.
	swaps := k.builder.Swaps()
	write(t, filepath.Join(dir, "slice.yaml"), sliceYAML("shop-1", "shop", false))
	testkit.Eventually(t, 5*time.Second, "the slice's change applied", func() bool { return k.builder.Swaps() > swaps })

	var lines []string
	for _, l := range strings.Split(logs.String(), "\n") {
		if strings.Contains(l, "not-an-ip") {
			lines = append(lines, l)
		}
	}
	lines2 := strings.Count(ingressYAML("ok", "ok.example.org", "shop", "192.0.2.12"), "\n") + 2 // the second document's first line
	want := filepath.Join(dir, "ingress.yaml") + ":" + strconv.Itoa(lines2) + ": Ingress web/shop: "
	if len(lines) != 1 || !strings.Contains(lines[0], want) {
		t.Errorf("want one log line containing %q, got %q", want, lines)
	}
	if d := testutil.ToFloat64(object.InvalidEndpoints.WithLabelValues(object.ReasonSource)) - before; d != 1 {
		t.Errorf("after a new derivation object.InvalidEndpoints{reason=source} rose by %v, want still 1", d)
	}
}

func TestDirectoryUnknownKindNamesWhatIsAccepted(t *testing.T) {
	deployment := "apiVersion: apps/v1\nkind: Deployment\nmetadata:\n  name: web\n"
	raw := testkit.DNSEndpoint("ns", "x", nil, testkit.EP("x.example.org", "A", 0, "192.0.2.1")) + "---\n" + deployment
	// The file's error is dirfeed's (TestUnknownKindNamesWhatIsAccepted);
	// through the handler it is counted, the DNSEndpoint served.
	before := testutil.ToFloat64(object.InvalidEndpoints.WithLabelValues(object.ReasonDecode))
	k, _ := newTestPlugin(t, "example.org", zoneBody, map[string]string{"app.yaml": raw})
	if !hasA(k, t, "x.example.org.", "192.0.2.1")() {
		t.Error("DNSEndpoint beside a Deployment not served")
	}
	if d := testutil.ToFloat64(object.InvalidEndpoints.WithLabelValues(object.ReasonDecode)) - before; d != 1 {
		t.Errorf("decode errors counted: %v, want 1", d)
	}
}

func TestDirectoryKnownKindNotServedSkippedSilently(t *testing.T) {
	logs := captureLog(t)
	before := testutil.ToFloat64(object.InvalidEndpoints.WithLabelValues(object.ReasonDecode))
	app := testkit.DNSEndpoint("web", "plain", nil, testkit.EP("plain.example.org", "A", 0, "192.0.2.1")) + "---\n" +
		ingressYAML("shop", "shop.example.org", "shop", "192.0.2.10") + "---\n" +
		sliceYAML("shop-1", "shop", true) + "---\n" +
		"apiVersion: gateway.networking.k8s.io/v1\nkind: Gateway\nmetadata: {name: gw, namespace: web}\nspec: {gatewayClassName: eg, listeners: []}\n" + "---\n" +
		"apiVersion: v1\nkind: Service\nmetadata: {name: shop, namespace: web}\nspec: {type: LoadBalancer}\n"
	k, _ := newTestPlugin(t, "example.org", zoneBody, map[string]string{"app.yaml": app})
	if !hasA(k, t, "plain.example.org.", "192.0.2.1")() {
		t.Error("DNSEndpoint beside kinds not served: not served")
	}
	if !isNXDOMAIN(k, t, "shop.example.org.")() {
		t.Error("Ingress served although resources does not name it")
	}
	if d := testutil.ToFloat64(object.InvalidEndpoints.WithLabelValues(object.ReasonDecode)) - before; d != 0 {
		t.Errorf("known kinds not served counted as decode errors: %v", d)
	}
	if strings.Contains(logs.String(), "app.yaml") {
		t.Errorf("known kinds not served: want no log line, got\n%s", logs)
	}
}

func TestDirectoryDerivedKindsFilteredByNamespaceAndLabels(t *testing.T) {
	labelled := func(s string) string {
		return strings.Replace(s, "  namespace: web\n", "  namespace: web\n  labels: {tier: public}\n", 1)
	}
	k, _ := newTestPlugin(t, "example.org", zoneBody+"\nresources Ingress\nnamespaces web\nlabels tier=public", map[string]string{
		"a.yaml": labelled(ingressYAML("in", "in.example.org", "svc", "192.0.2.1")) + "---\n" +
			ingressYAML("unlabelled", "unlabelled.example.org", "svc", "192.0.2.2") + "---\n" +
			strings.Replace(labelled(ingressYAML("other", "otherns.example.org", "svc", "192.0.2.3")), "namespace: web", "namespace: other", 1),
	})
	if !hasA(k, t, "in.example.org.", "192.0.2.1")() {
		t.Error("Ingress in a listed namespace with matching labels not served")
	}
	for _, name := range []string{"unlabelled.example.org.", "otherns.example.org."} {
		if !isNXDOMAIN(k, t, name)() {
			t.Errorf("%s: filtered out by labels or namespace, yet served", name)
		}
	}
}

func TestDirectoryRouteReadsGatewaysOfOtherFiles(t *testing.T) {
	route := `apiVersion: gateway.networking.k8s.io/v1
kind: HTTPRoute
metadata: {name: api, namespace: web, generation: 1}
spec:
  parentRefs: [{name: gw}]
  hostnames: [api.example.org]
  rules:
  - backendRefs: [{name: api, port: 80}]
status:
  parents:
  - parentRef: {name: gw}
    controllerName: example.org/gateway
    conditions:
    - {type: Accepted, status: "True", reason: Accepted, message: "", observedGeneration: 1, lastTransitionTime: "2026-01-01T00:00:00Z"}
`
	gateway := `apiVersion: gateway.networking.k8s.io/v1
kind: Gateway
metadata: {name: gw, namespace: web}
spec:
  gatewayClassName: eg
  listeners:
  - {name: http, port: 80, protocol: HTTP}
status:
  addresses:
  - {type: IPAddress, value: 192.0.2.20}
`
	k, dir := newTestPlugin(t, "example.org", zoneBody+"\nresources HTTPRoute", map[string]string{"route.yaml": route})
	if !isNXDOMAIN(k, t, "api.example.org.")() {
		t.Error("route without its Gateway: want nothing declared")
	}
	write(t, filepath.Join(dir, "gateway.yaml"), gateway)
	testkit.Eventually(t, 5*time.Second, "route served once its Gateway's file appears", hasA(k, t, "api.example.org.", "192.0.2.20"))
}
