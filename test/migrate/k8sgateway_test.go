package migrate_test

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/fleetdns/fleetdns/internal/testkit"
	"github.com/fleetdns/fleetdns/test/harness"
	"github.com/miekg/dns"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/util/retry"
)

// k8sGatewayData is k8s_gateway's own manifests, copied with its licence.
const k8sGatewayData = "testdata/k8s_gateway"

// k8sGatewayManifests are the files of k8sGatewayData the test applies, in order.
var k8sGatewayManifests = []string{
	"examples_install-clusterwide.yml",
	"test_backend.yml",
	"test_gatewayclasses.yaml",
	"test_single-stack_ingress-services.yml",
	"test_single-stack_service-annotation.yml",
	"test_gateway-api_resources.yml",
	"test_headless-service.yml",
	"test_dnsendpoint.yaml",
	"fleetdns_gateway_test-fixtures.yaml",
}

// k8sGatewayStatus is the load balancers' status the test writes, as the
// controllers would (testdata/k8s_gateway/README.md): kind, namespace/name ->
// addresses.
var k8sGatewayStatus = []struct{ kind, key string }{
	{"Ingress", "default/ingress-myservicea=198.18.10.1"},
	{"Ingress", "default/ignored-ingress=198.18.10.2"},
	{"Service", "default/test=198.18.10.3,fd00:10::3"},
	{"Service", "default/ignored-service=198.18.10.4"},
	{"Service", "default/annotation-good=198.18.10.5"},
	{"Service", "default/annotation-bad=198.18.10.6"},
	{"Service", "default/annotation-bad-2=198.18.10.7"},
	{"Service", "kube-system/external-dns=198.18.10.8"},
	{"Service", "kube-system/fleetdns-gateway=198.18.10.53"},
	{"Gateway", "default/gateway-one=198.18.10.9"},
	{"Gateway", "default/gateway-two=198.18.10.10"},
	{"Ingress", "default/wildcard=198.18.10.12"},
	{"Ingress", "default/specific-subdomain=198.18.10.13"},
	{"Ingress", "default/svc2=198.18.10.14"},
	{"Service", "default/svc2=198.18.10.15"},
}

var (
	k8sGatewayGVR = map[string]schema.GroupVersionResource{
		"Ingress":   {Group: "networking.k8s.io", Version: "v1", Resource: "ingresses"},
		"Gateway":   {Group: "gateway.networking.k8s.io", Version: "v1", Resource: "gateways"},
		"HTTPRoute": {Group: "gateway.networking.k8s.io", Version: "v1", Resource: "httproutes"},
		"GRPCRoute": {Group: "gateway.networking.k8s.io", Version: "v1", Resource: "grpcroutes"},
		"TLSRoute":  {Group: "gateway.networking.k8s.io", Version: "v1", Resource: "tlsroutes"},
	}
)

// TestK8sGatewayGuideAnswersAsK8sGateway follows docs/replace-k8s-gateway.md
// on a real API server holding k8s_gateway's own examples (its examples/
// and test/ manifests, with the status their controllers would write): the
// guide's Corefile answers every row of testdata/k8s_gateway/answers.md as
// k8s_gateway does, or as the row says and why; the same Corefile without
// the naming words leaves k8s_gateway's names unserved, each logged once
// and counted; and live changes (an annotation edited, a Service deleted)
// reach the answers.
func TestK8sGatewayGuideAnswersAsK8sGateway(t *testing.T) {
	k := harness.StartKube(t)
	k.InstallGatewayAPI(t)
	// k8s_gateway's examples hold GatewayClasses too, a kind k8scrd does not read.
	classes := filepath.Join(filepath.Dir(harness.GatewayAPICRDFiles(t)[0]), "gateway.networking.k8s.io_gatewayclasses.yaml")
	if b, err := os.ReadFile(classes); err != nil {
		t.Fatal(err)
	} else {
		k.Apply(t, string(b))
		k.WaitCRDEstablished(t, "gatewayclasses.gateway.networking.k8s.io")
	}
	for _, f := range k8sGatewayManifests {
		b, err := os.ReadFile(filepath.Join(k8sGatewayData, f))
		if err != nil {
			t.Fatal(err)
		}
		// Gateway API v1.6 serves TLSRoute and GRPCRoute as v1 only, the
		// version k8s_gateway reads them at; created, not applied, so
		// that the fields neither kind has are pruned (testdata README),
		// as kubectl create --validate=warn does.
		objs, err := harness.DecodeYAML(strings.ReplaceAll(string(b), "gateway.networking.k8s.io/v1alpha2", "gateway.networking.k8s.io/v1"))
		if err != nil {
			t.Fatalf("%s: %v", f, err)
		}
		for _, o := range objs {
			k.Create(t, o)
		}
	}
	// The guide's release: its LoadBalancer Service, the name server's address.
	k.Apply(t, "apiVersion: v1\nkind: Service\nmetadata: {name: fleetdns-gateway, namespace: kube-system}\nspec:\n  type: LoadBalancer\n  ports: [{name: dns, port: 53, protocol: UDP}]\n")
	for _, s := range k8sGatewayStatus {
		key, addrs, _ := strings.Cut(s.key, "=")
		setLoadBalancer(t, k, s.kind, key, strings.Split(addrs, ","))
	}
	acceptRoutes(t, k)
	ready := func(a string) discoveryv1.Endpoint {
		return discoveryv1.Endpoint{Addresses: []string{a}, Conditions: discoveryv1.EndpointConditions{Ready: new(true)}}
	}
	k.PutEndpointSlice(t, "default", &discoveryv1.EndpointSlice{
		ObjectMeta:  metav1.ObjectMeta{Name: "backend-headless-abcde", Labels: map[string]string{discoveryv1.LabelServiceName: "backend-headless"}},
		AddressType: discoveryv1.AddressTypeIPv4,
		Endpoints:   []discoveryv1.Endpoint{ready("198.18.20.1"), ready("198.18.20.2"), ready("198.18.20.3")},
	})

	corefile := guideCorefile(t)
	guide := startGuideCorefile(t, corefile, k.Kubeconfig)
	off := startGuideCorefile(t, withoutWords(corefile), k.Kubeconfig)

	t.Run("answers", func(t *testing.T) {
		for _, row := range answerRows(t) {
			testkit.Eventually(t, 10*time.Second, row.name+" "+row.qtype, func() (bool, string) {
				got := guideAnswer(guide.Addr, row.name, dns.StringToType[row.qtype])
				return got == row.want, fmt.Sprintf("%s %s = %s, want %s (k8s_gateway: %s; %s)", row.name, row.qtype, got, row.want, row.k8sGateway, row.where)
			})
		}
		r, err := harness.Ask(guide.Addr, "myservicea.foo.org", dns.TypeA)
		if err != nil || len(r.Answer) != 1 || r.Answer[0].Header().Ttl != 300 || !r.Authoritative {
			t.Errorf("myservicea.foo.org A: %v %v, want one record, TTL 300 (the chart's ttl), AA", r, err)
		}
		// The name that k8s_gateway would serve from pod addresses: said.
		m := harness.Scrape(t, guide.metrics)
		if v := m.Sum("coredns_k8scrd_unserved_names_total", "reason", "k8s_gateway_resolve_endpoints"); v != 1 {
			t.Errorf("unserved resolve-endpoints names %v, want 1 (backend-headless.default.foo.org)", v)
		}
		if !strings.Contains(guide.Log(), "Service default/backend-headless: not served, as k8s_gateway would serve them: backend-headless.default.foo.org.") {
			t.Errorf("no log line for backend-headless:\n%s", guide.Log())
		}
		if m.Sum("coredns_k8scrd_unserved_names_total", "reason", "k8s_gateway_service_name")+
			m.Sum("coredns_k8scrd_unserved_names_total", "reason", "k8s_gateway_annotation")+
			m.Sum("coredns_k8scrd_unserved_names_total", "reason", "k8s_gateway_relative_host") != 0 {
			t.Errorf("with the words on, names are still unserved:\n%s", guide.Log())
		}
	})

	t.Run("words-off", func(t *testing.T) {
		for name, want := range map[string]string{
			"myservicea.foo.org":               "198.18.10.1", // external-dns's conventions serve the Ingress alike
			"test.default.foo.org":             "NXDOMAIN",
			"external-dns.kube-system.foo.org": "NXDOMAIN",
			"good.ok.foo.org":                  "NXDOMAIN",
		} {
			testkit.Eventually(t, 10*time.Second, name, func() (bool, string) {
				got := guideAnswer(off.Addr, name, dns.TypeA)
				return got == want, fmt.Sprintf("%s A without the words = %s, want %s", name, got, want)
			})
		}
		m := harness.Scrape(t, off.metrics)
		for reason, want := range map[string]float64{
			"k8s_gateway_service_name":      4, // test, external-dns, fleetdns-gateway, svc2
			"k8s_gateway_annotation":        1, // good.ok of annotation-good (the bad ones name nothing)
			"k8s_gateway_resolve_endpoints": 1,
		} {
			if v := m.Sum("coredns_k8scrd_unserved_names_total", "reason", reason); v != want {
				t.Errorf("unserved %s: %v, want %v\n%s", reason, v, want, off.Log())
			}
		}
		log := off.Log()
		for _, line := range []string{
			"Service default/test: not served, as k8s_gateway would serve them: test.default.foo.org. (k8s_gateway NAME.NAMESPACE name of a LoadBalancer Service; enable with `service_names`)",
			"Service default/annotation-good: not served, as k8s_gateway would serve them: good.ok.foo.org. (k8s_gateway annotation coredns.io/hostname; enable with `hostname_annotation coredns.io/hostname external-dns.alpha.kubernetes.io/hostname`)",
		} {
			if n := strings.Count(log, line); n != 1 {
				t.Errorf("logged %d times, want once: %s\n%s", n, line, log)
			}
		}
	})

	t.Run("live", func(t *testing.T) {
		// An annotation edited: the old name goes, the new one is served.
		k.Apply(t, "apiVersion: v1\nkind: Service\nmetadata:\n  name: annotation-good\n  namespace: default\n  annotations: {coredns.io/hostname: better.ok}\nspec:\n  type: LoadBalancer\n  ports: [{name: 80-80, port: 80, protocol: TCP, targetPort: 80}]\n  selector: {app: backend}\n")
		expectGuide(t, guide.Addr, "better.ok.foo.org", "198.18.10.5")
		expectGuide(t, guide.Addr, "good.ok.foo.org", "NXDOMAIN")
		// The words-off server says the new name once.
		testkit.Eventually(t, 10*time.Second, "better.ok logged", func() (bool, string) {
			return strings.Contains(off.Log(), "better.ok.foo.org. (k8s_gateway annotation"), "no log line for better.ok.foo.org"
		})
		// A Service deleted: its NAME.NAMESPACE name goes.
		svc := &unstructured.Unstructured{}
		svc.SetAPIVersion("v1")
		svc.SetKind("Service")
		svc.SetNamespace("default")
		svc.SetName("test")
		k.Delete(t, svc)
		expectGuide(t, guide.Addr, "test.default.foo.org", "NXDOMAIN")
		// A load balancer's new address.
		setLoadBalancer(t, k, "Ingress", "default/ingress-myservicea", []string{"198.18.10.11"})
		expectGuide(t, guide.Addr, "myservicea.foo.org", "198.18.10.11")
	})
}

// guideServer is the guide's Corefile running against the test's API server.
type guideServer struct {
	*harness.CoreDNS
	metrics string
}

// guideCorefile is the Corefile block of docs/replace-k8s-gateway.md,
// whose k8scrd block is the one `helm template` renders from
// charts/fleetdns/values-k8s-gateway.yaml.
func guideCorefile(t *testing.T) string {
	t.Helper()
	root := harness.ModuleRoot(t)
	corefile := guideDocCorefile(t)

	helm := filepath.Join(harness.KubeBin(t), "helm")
	if _, err := os.Stat(helm); err != nil {
		harness.Missing(t, "helm: not in %s (scripts/test-deps.sh builds it)", filepath.Dir(helm))
	}
	home := t.TempDir()
	cmd := exec.Command(helm, "template", "fleetdns-gateway", "charts/fleetdns", "-n", "kube-system", "-f", "charts/fleetdns/values-k8s-gateway.yaml")
	cmd.Dir = root
	cmd.Env = append(os.Environ(), "HELM_CACHE_HOME="+home, "HELM_CONFIG_HOME="+home, "HELM_DATA_HOME="+home, "KUBECONFIG=/nonexistent")
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("helm template: %v\n%s", err, out)
	}
	objs, err := harness.DecodeYAML(string(out))
	if err != nil {
		t.Fatal(err)
	}
	k8scrd := regexp.MustCompile(`(?s)\n\s*(k8scrd [^{]*\{.*?\n\s*\})`)
	block := func(s string) string {
		m := k8scrd.FindStringSubmatch(s)
		if m == nil {
			return ""
		}
		var lines []string
		for l := range strings.SplitSeq(m[1], "\n") {
			lines = append(lines, strings.TrimSpace(l))
		}
		return strings.Join(lines, "\n")
	}
	for _, o := range objs {
		if o.GetKind() != "ConfigMap" {
			continue
		}
		rendered, _, _ := unstructured.NestedString(o.Object, "data", "Corefile")
		if got, want := block(rendered), block(corefile); got == "" || got != want {
			t.Fatalf("the chart values' k8scrd block:\n%s\nis not the guide's:\n%s", got, want)
		}
		return corefile
	}
	t.Fatal("helm template: no ConfigMap")
	return ""
}

// guideDocCorefile is the Corefile block of docs/replace-k8s-gateway.md.
func guideDocCorefile(t *testing.T) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(harness.ModuleRoot(t), "docs/replace-k8s-gateway.md"))
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile("(?s)~~~ corefile\n(.*?)~~~").FindStringSubmatch(string(b))
	if m == nil {
		t.Fatal("docs/replace-k8s-gateway.md: no corefile block")
	}
	return m[1]
}

// withoutWords is corefile with external-dns's conventions: the naming
// words left out.
func withoutWords(corefile string) string {
	var plain []string
	for l := range strings.SplitSeq(corefile, "\n") {
		if w := strings.Fields(l); len(w) > 0 && slices.Contains([]string{"hostname_annotation", "service_names", "relative_hosts"}, w[0]) {
			continue
		}
		plain = append(plain, l)
	}
	return strings.Join(plain, "\n")
}

// startGuideCorefile runs corefile on a loopback address of its own, with
// its metrics and ready on free ports and k8scrd reading kubeconfig.
func startGuideCorefile(t *testing.T, corefile, kubeconfig string) *guideServer {
	t.Helper()
	ip := harness.NewIP(t)
	s := &guideServer{metrics: harness.HostPort(t, ip)}
	ready := harness.HostPort(t, ip)
	r := strings.NewReplacer(
		"foo.org:1053 {", "foo.org {\n    bind "+ip,
		"prometheus :9153", "prometheus "+s.metrics,
		"    ready\n", "    ready "+ready+"\n",
		"k8scrd foo.org {", "k8scrd foo.org {\n        kubeconfig "+kubeconfig,
	)
	s.CoreDNS = harness.StartCoreDNS(t, r.Replace(corefile), harness.WithReadyURL("http://"+ready+"/ready"), harness.WithStartTimeout(time.Minute))
	return s
}

// answerRow is one row of answers.md.
type answerRow struct {
	name, qtype, k8sGateway, want, where string
	why                                  string // why fleetdns's answer differs ("" when the same)
}

// answerRows reads testdata/k8s_gateway/answers.md: fleetdns's answer is
// the k8s_gateway column where the fleetdns one says `same`, else the
// fleetdns column up to its parenthesis (why it differs).
func answerRows(t *testing.T) []answerRow {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(k8sGatewayData, "answers.md"))
	if err != nil {
		t.Fatal(err)
	}
	var rows []answerRow
	for l := range strings.SplitSeq(string(b), "\n") {
		cells := strings.Split(strings.Trim(l, "| "), " | ")
		if !strings.HasPrefix(l, "| ") || len(cells) != 5 || cells[0] == "query" || strings.HasPrefix(cells[0], "---") {
			continue
		}
		r := answerRow{name: cells[0], qtype: cells[1], k8sGateway: cells[2], want: cells[3], where: cells[4]}
		if r.want == "same" {
			r.want = r.k8sGateway
		} else if i := strings.Index(r.want, " ("); i > 0 {
			r.why = strings.TrimSuffix(r.want[i+2:], ")")
			r.want = r.want[:i]
		} else {
			t.Fatalf("answers.md: %s %s: a different answer without its reason", r.name, r.qtype)
		}
		if dns.StringToType[r.qtype] == 0 {
			t.Fatalf("answers.md: %s: type %q", r.name, r.qtype)
		}
		rows = append(rows, r)
	}
	if len(rows) < 30 {
		t.Fatalf("answers.md: %d rows", len(rows))
	}
	return rows
}

// guideAnswer is what a user sees of name and qtype at addr, in
// answers.md's form: the data sorted and comma-separated (an SOA without
// its serial), NODATA, or the rcode.
func guideAnswer(addr, name string, qtype uint16) string {
	r, err := harness.Ask(addr, name, qtype, harness.NoRD, harness.Timeout(time.Second), harness.Attempts(2))
	if err != nil {
		return "error: " + err.Error()
	}
	if r.Rcode != dns.RcodeSuccess {
		return dns.RcodeToString[r.Rcode]
	}
	var data []string
	for _, rr := range r.Answer {
		if rr.Header().Rrtype != qtype {
			continue
		}
		if soa, ok := rr.(*dns.SOA); ok {
			data = append(data, fmt.Sprintf("%s %s %d %d %d %d", soa.Ns, soa.Mbox, soa.Refresh, soa.Retry, soa.Expire, soa.Minttl))
			continue
		}
		data = append(data, strings.TrimSpace(strings.TrimPrefix(rr.String(), rr.Header().String())))
	}
	if len(data) == 0 {
		return "NODATA"
	}
	slices.Sort(data)
	return strings.Join(data, ",")
}

// expectGuide waits until name A at addr answers want.
func expectGuide(t *testing.T, addr, name, want string) {
	t.Helper()
	testkit.Eventually(t, 10*time.Second, name, func() (bool, string) {
		got := guideAnswer(addr, name, dns.TypeA)
		return got == want, fmt.Sprintf("%s A = %s, want %s", name, got, want)
	})
}

// setLoadBalancer writes the addresses of the object kind "namespace/name"
// into its status, as a load balancer (Service, Ingress) or a Gateway
// controller (Gateway) does.
func setLoadBalancer(t *testing.T, k *harness.Kube, kind, key string, addrs []string) {
	t.Helper()
	ns, name, _ := strings.Cut(key, "/")
	if kind == "Service" {
		k.LoadBalancerStatus(t, ns, name, addrs...)
		return
	}
	ri := k.Dynamic().Resource(k8sGatewayGVR[kind]).Namespace(ns)
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		obj, err := ri.Get(harness.Context(t), name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		var list []any
		for _, a := range addrs {
			if kind == "Gateway" {
				list = append(list, map[string]any{"type": "IPAddress", "value": a})
			} else {
				list = append(list, map[string]any{"ip": a})
			}
		}
		path := []string{"status", "loadBalancer", "ingress"}
		if kind == "Gateway" {
			path = []string{"status", "addresses"}
		}
		if err := unstructured.SetNestedSlice(obj.Object, list, path...); err != nil {
			return err
		}
		_, err = ri.UpdateStatus(harness.Context(t), obj, metav1.UpdateOptions{})
		return err
	})
	if err != nil {
		t.Fatalf("status of %s %s: %v", kind, key, err)
	}
}

// acceptRoutes writes every route's status as a Gateway controller would:
// for each parentRef naming a Gateway that exists, Accepted at the route's
// generation, except a TLSRoute (k8s_gateway's Gateways have HTTP listeners
// only: NotAllowedByListeners).
func acceptRoutes(t *testing.T, k *harness.Kube) {
	t.Helper()
	now := time.Now().UTC().Format(time.RFC3339)
	for _, kind := range []string{"HTTPRoute", "GRPCRoute", "TLSRoute"} {
		ri := k.Dynamic().Resource(k8sGatewayGVR[kind])
		list, err := ri.List(harness.Context(t), metav1.ListOptions{})
		if err != nil {
			t.Fatal(err)
		}
		for _, route := range list.Items {
			refs, _, _ := unstructured.NestedSlice(route.Object, "spec", "parentRefs")
			var parents []any
			for _, r := range refs {
				ref := r.(map[string]any)
				ns, _ := ref["namespace"].(string)
				if ns == "" {
					ns = route.GetNamespace()
				}
				if _, err := k.Dynamic().Resource(k8sGatewayGVR["Gateway"]).Namespace(ns).Get(harness.Context(t), ref["name"].(string), metav1.GetOptions{}); err != nil {
					continue // no such Gateway: no controller writes a status for it
				}
				status, reason := "True", "Accepted"
				if kind == "TLSRoute" {
					status, reason = "False", "NotAllowedByListeners"
				}
				parents = append(parents, map[string]any{
					"parentRef":      ref,
					"controllerName": "istio.io/gateway-controller",
					"conditions": []any{map[string]any{
						"type": "Accepted", "status": status, "reason": reason, "message": "",
						"observedGeneration": route.GetGeneration(), "lastTransitionTime": now,
					}},
				})
			}
			if len(parents) == 0 {
				continue
			}
			if err := unstructured.SetNestedSlice(route.Object, parents, "status", "parents"); err != nil {
				t.Fatal(err)
			}
			if _, err := ri.Namespace(route.GetNamespace()).UpdateStatus(harness.Context(t), &route, metav1.UpdateOptions{}); err != nil {
				t.Fatalf("status of %s %s/%s: %v", kind, route.GetNamespace(), route.GetName(), err)
			}
		}
	}
}

// TestK8sGatewayGuideLint runs the guide's pre-flight check, `coredns -lint`,
// over k8s_gateway's examples as the guide test applies them (before any
// controller wrote a status): with the guide's Corefile, the names the lint
// lists with a k8s_gateway reason are exactly the rows answers.md marks
// `unserved REASON`, and the TLSRoute of the row `route not accepted` is
// listed as not accepted; without the naming words, every name the words
// serve is listed with its reason and advice. The other differing rows of
// answers.md are the shape of an answer (NODATA for NXDOMAIN, an empty
// non-terminal, a wildcard's depth, merged addresses), not a name left
// unserved: nothing for the lint to list.
func TestK8sGatewayGuideLint(t *testing.T) {
	dir := t.TempDir()
	m := filepath.Join(dir, "manifests")
	if err := os.Mkdir(m, 0o755); err != nil {
		t.Fatal(err)
	}
	for _, f := range k8sGatewayManifests {
		b, err := os.ReadFile(filepath.Join(k8sGatewayData, f))
		if err != nil {
			t.Fatal(err)
		}
		// As the guide test creates them: the routes at v1 (testdata README).
		v1 := strings.ReplaceAll(string(b), "gateway.networking.k8s.io/v1alpha2", "gateway.networking.k8s.io/v1")
		if err := os.WriteFile(filepath.Join(m, f), []byte(v1), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	corefile := guideDocCorefile(t)

	unserved := map[string]string{} // name -> reason, of the rows marked unserved
	for _, r := range answerRows(t) {
		if reason, ok := strings.CutPrefix(r.why, "unserved "); ok {
			unserved[dns.Fqdn(strings.ToLower(r.name))] = reason
		}
	}
	if len(unserved) == 0 {
		t.Fatal("answers.md marks no row unserved")
	}

	code, out := lintGuide(t, m, filepath.Join(dir, "Corefile"), corefile)
	if code != 1 {
		t.Errorf("lint with the guide's Corefile: exit %d, want 1 (a name unserved):\n%s", code, out)
	}
	if got := k8sGatewayListed(out); !maps.Equal(got, unserved) {
		t.Errorf("the lint lists %v with a k8s_gateway reason, answers.md marks %v unserved:\n%s", got, unserved, out)
	}
	for _, l := range []string{
		"test_gateway-api_resources.yml:111: TLSRoute default/myservicetls: NameSkipped: parent Gateway default/gateway-one has not accepted it",
		"test_single-stack_service-annotation.yml:2: Service default/annotation-good: serves good.ok.foo.org. A (no targets yet)",
		"test_single-stack_ingress-services.yml:21: Service default/test: serves test.default.foo.org. A (no targets yet)",
	} {
		if !strings.Contains(out, l) {
			t.Errorf("the lint lacks %q:\n%s", l, out)
		}
	}

	code, out = lintGuide(t, m, filepath.Join(dir, "Corefile.plain"), withoutWords(corefile))
	if code != 1 {
		t.Errorf("lint without the words: exit %d, want 1:\n%s", code, out)
	}
	want := maps.Clone(unserved)
	maps.Copy(want, map[string]string{
		"test.default.foo.org.":             "k8s_gateway_service_name",
		"external-dns.kube-system.foo.org.": "k8s_gateway_service_name",
		"svc2.default.foo.org.":             "k8s_gateway_service_name",
		"good.ok.foo.org.":                  "k8s_gateway_annotation",
	})
	if got := k8sGatewayListed(out); !maps.Equal(got, want) {
		t.Errorf("without the words the lint lists %v, want %v:\n%s", got, want, out)
	}
	if !strings.Contains(out, "good.ok.foo.org. (k8s_gateway_annotation): k8s_gateway annotation coredns.io/hostname; enable with `hostname_annotation coredns.io/hostname external-dns.alpha.kubernetes.io/hostname`") {
		t.Errorf("good.ok.foo.org. without its advice:\n%s", out)
	}
}

// lintGuide writes corefile to path and runs the binary's lint of dir
// with it, returning the exit code and the output.
func lintGuide(t *testing.T, dir, path, corefile string) (int, string) {
	t.Helper()
	if err := os.WriteFile(path, []byte(corefile), 0o644); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(harness.Context(t), time.Minute)
	defer cancel()
	out, err := harness.Run(ctx, harness.CoreDNSBinary(t), "-lint", dir, "-conf", path)
	var exit *exec.ExitError
	switch {
	case err == nil:
		return 0, out
	case errors.As(err, &exit):
		return exit.ExitCode(), out
	}
	t.Fatalf("coredns -lint: %v\n%s", err, out)
	return 0, ""
}

// k8sGatewayListed are the names the lint's output lists as not served
// with a k8s_gateway reason: "NAME (k8s_gateway_REASON): ...".
func k8sGatewayListed(out string) map[string]string {
	listed := map[string]string{}
	for _, m := range regexp.MustCompile(`NameSkipped: (\S+) \((k8s_gateway_[a-z_]+)\): `).FindAllStringSubmatch(out, -1) {
		listed[m[1]] = m[2]
	}
	return listed
}
