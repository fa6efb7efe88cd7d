package deploy

import (
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/fleetdns/fleetdns/test/harness"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
)

// TestCRDAppliesAndIsEstablished applies deploy/crd as the docs say and
// waits for the API server to serve the DNSEndpoint kind.
func TestCRDAppliesAndIsEstablished(t *testing.T) {
	k := harness.SharedKube(t)
	root := harness.ModuleRoot(t)
	out := k.Kubectl(t, "apply", "--server-side", "-f", filepath.Join(root, "deploy/crd/"))
	if !strings.Contains(out, "customresourcedefinition.apiextensions.k8s.io/dnsendpoints.externaldns.k8s.io serverside-applied") {
		t.Fatalf("kubectl apply deploy/crd: %s", out)
	}
	k.Kubectl(t, "wait", "--for=condition=Established", "--timeout=60s", "crd/dnsendpoints.externaldns.k8s.io")
	if out := k.Kubectl(t, "api-resources", "--api-group=externaldns.k8s.io", "-o", "name"); !strings.Contains(out, "dnsendpoints.externaldns.k8s.io") {
		t.Fatalf("API server does not serve dnsendpoints after the CRD: %q", out)
	}
}

// TestKustomizationsApplyServerSide renders every kustomization users apply
// (except kube-system, which TestKubeSystemDropInReplacesStock applies over
// stock objects) and applies it server-side: every object is accepted.
func TestKustomizationsApplyServerSide(t *testing.T) {
	k := harness.SharedKube(t)
	for _, c := range []struct {
		dir  string
		want []string // objects that must be in the rendering
	}{
		{"deploy/gslb", []string{"Namespace//fleetdns", "ServiceAccount/fleetdns/fleetdns-gslb", "Role/fleetdns/fleetdns:gslb",
			"RoleBinding/fleetdns/fleetdns:gslb", "ClusterRole//fleetdns:gslb", "ClusterRoleBinding//fleetdns:gslb", "ConfigMap/fleetdns/fleetdns-gslb", "Service/fleetdns/fleetdns-gslb", "Deployment/fleetdns/fleetdns-gslb"}},
		{"deploy/sidecar", []string{"Namespace//sidecar-example", "ConfigMap/sidecar-example/fleetdns-sidecar", "Deployment/sidecar-example/app"}},
		{"deploy/multicluster/parent", []string{"Namespace//fleetdns", "DNSEndpoint/fleetdns/gslb-delegation"}},
		{"deploy/multicluster/overlays/eu", []string{"DNSEndpoint/fleetdns/gslb-zone-apex", "Deployment/fleetdns/fleetdns-gslb",
			"Deployment/fleetdns/app", "Service/fleetdns/app", "Ingress/fleetdns/app"}},
		{"deploy/multicluster/overlays/us", []string{"DNSEndpoint/fleetdns/gslb-zone-apex", "Deployment/fleetdns/fleetdns-gslb",
			"Deployment/fleetdns/app", "Service/fleetdns/app", "Ingress/fleetdns/app"}},
	} {
		t.Run(strings.ReplaceAll(c.dir, "/", "_"), func(t *testing.T) {
			objs := k.Kustomize(t, c.dir)
			have := map[string]bool{}
			for _, s := range harness.KindsOf(objs) {
				have[s] = true
			}
			for _, w := range c.want {
				if !have[w] {
					t.Errorf("kubectl kustomize %s lacks %s; has %v", c.dir, w, harness.KindsOf(objs))
				}
			}
			if c.dir == "deploy/multicluster/parent" {
				// The parent zone's cluster: its namespace comes with the
				// fleet (deploy/gslb); here it may not exist yet.
				k.EnsureNamespace(t, "fleetdns")
			}
			applyAsUsers(t, k, objs)
		})
	}
}

// TestOverlaysSetPerClusterValues checks that each cluster's overlay gives
// the GSLB pods its own geo tag, pins the name servers' load balancer to the
// address the parent's glue names, and brings the app whose Ingress declares
// app.gslb.example.com with its failover policy and a backend that exists.
func TestOverlaysSetPerClusterValues(t *testing.T) {
	k := harness.SharedKube(t)
	root := harness.ModuleRoot(t)
	glue := glueOf(t, root)
	for _, tag := range []string{"eu", "us"} {
		objs := k.Kustomize(t, "deploy/multicluster/overlays/"+tag)
		var cmName, envFrom, lbIP string
		var ing *networkingv1.Ingress
		appPorts := map[string]bool{}
		for _, o := range objs {
			switch {
			case o.GetKind() == "ConfigMap" && strings.HasPrefix(o.GetName(), "fleetdns-cluster-"):
				cmName = o.GetName()
				data := o.Object["data"].(map[string]any)
				if data["FLEETDNS_GEOTAG"] != tag {
					t.Errorf("overlay %s: FLEETDNS_GEOTAG = %v", tag, data["FLEETDNS_GEOTAG"])
				}
			case o.GetKind() == "Deployment" && o.GetName() == "fleetdns-gslb":
				cs := o.Object["spec"].(map[string]any)["template"].(map[string]any)["spec"].(map[string]any)["containers"].([]any)
				ef := cs[0].(map[string]any)["envFrom"].([]any)
				envFrom = ef[0].(map[string]any)["configMapRef"].(map[string]any)["name"].(string)
			case o.GetKind() == "Service" && o.GetName() == "fleetdns-gslb":
				lbIP, _ = o.Object["spec"].(map[string]any)["loadBalancerIP"].(string)
			}
		}
		if svc := findObject[corev1.Service](t, objs, "Service", "app"); svc != nil {
			for _, p := range svc.Spec.Ports {
				appPorts[p.Name] = true
			}
		}
		ing = findObject[networkingv1.Ingress](t, objs, "Ingress", "app")
		if cmName == "" || envFrom != cmName {
			t.Errorf("overlay %s: Deployment reads ConfigMap %q, generated %q (kustomize must rewrite the hashed name)", tag, envFrom, cmName)
		}
		if want := glue["gslb-ns-"+tag+".gslb.example.com"]; lbIP != want || want == "" {
			t.Errorf("overlay %s: Service loadBalancerIP %q, parent's glue for gslb-ns-%s says %q", tag, lbIP, tag, want)
		}
		if ing.Namespace != "fleetdns" {
			t.Errorf("overlay %s: Ingress app in namespace %q; the shipped Corefile reads fleetdns only", tag, ing.Namespace)
		}
		if got := ing.Annotations["gslb.fleetdns.io/strategy"] + " " + ing.Annotations["gslb.fleetdns.io/primary"]; got != "failover eu" {
			t.Errorf("overlay %s: Ingress app strategy and primary %q, want failover eu", tag, got)
		}
		if len(ing.Spec.Rules) != 1 || ing.Spec.Rules[0].Host != "app.gslb.example.com" || ing.Spec.Rules[0].HTTP == nil ||
			len(ing.Spec.Rules[0].HTTP.Paths) == 0 || ing.Spec.Rules[0].HTTP.Paths[0].Backend.Service == nil {
			t.Fatalf("overlay %s: Ingress app rules %+v, want host app.gslb.example.com with a Service backend", tag, ing.Spec.Rules)
		}
		if b := ing.Spec.Rules[0].HTTP.Paths[0].Backend.Service; b.Name != "app" || !appPorts[b.Port.Name] {
			t.Errorf("overlay %s: Ingress app's backend %s port %q is not a port of Service app (%v): its health would never be ready", tag, b.Name, b.Port.Name, appPorts)
		}
		d := findObject[appsv1.Deployment](t, objs, "Deployment", "app")
		if d.Spec.Replicas == nil || *d.Spec.Replicas < 1 || d.Spec.Template.Spec.Containers[0].ReadinessProbe == nil {
			t.Errorf("overlay %s: Deployment app replicas %v, readinessProbe %v: its readiness is the host's health", tag, d.Spec.Replicas, d.Spec.Template.Spec.Containers[0].ReadinessProbe)
		}
	}
}

// glueOf reads the parent's delegation: name server -> address.
func glueOf(t *testing.T, root string) map[string]string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(root, "deploy/multicluster/parent/delegation.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	objs, err := harness.DecodeYAML(string(b))
	if err != nil {
		t.Fatal(err)
	}
	glue := map[string]string{}
	for _, ep := range objs[0].Object["spec"].(map[string]any)["endpoints"].([]any) {
		e := ep.(map[string]any)
		if e["recordType"] == "A" {
			glue[e["dnsName"].(string)] = e["targets"].([]any)[0].(string)
		}
	}
	return glue
}

// dnsEndpointFiles lists every YAML/JSON file under the given folders that
// holds a DNSEndpoint.
func dnsEndpointFiles(t *testing.T, root string, dirs ...string) []string {
	t.Helper()
	var files []string
	for _, d := range dirs {
		err := filepath.WalkDir(filepath.Join(root, d), func(p string, de os.DirEntry, err error) error {
			if err != nil {
				return err
			}
			ext := filepath.Ext(p)
			if de.IsDir() || (ext != ".yaml" && ext != ".yml" && ext != ".json") {
				return nil
			}
			b, err := os.ReadFile(p)
			if err != nil {
				return err
			}
			if strings.Contains(string(b), "DNSEndpoint") && strings.Contains(string(b), "externaldns.k8s.io/v1alpha1") {
				files = append(files, p)
			}
			return nil
		})
		if err != nil && !os.IsNotExist(err) {
			t.Fatal(err)
		}
	}
	sort.Strings(files)
	return files
}

// TestExampleDNSEndpointsValidAgainstCRD applies every DNSEndpoint the
// repository ships (deploy/ and examples/) with --dry-run=server: the CRD's
// schema accepts each of them.
func TestExampleDNSEndpointsValidAgainstCRD(t *testing.T) {
	k := harness.SharedKube(t)
	root := harness.ModuleRoot(t)
	files := dnsEndpointFiles(t, root, "deploy", "examples")
	if len(files) < 5 {
		t.Fatalf("found only %d files with DNSEndpoints: %v", len(files), files)
	}
	total := 0
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		objs, err := harness.DecodeYAML(string(b))
		if err != nil {
			t.Fatalf("%s: %v", f, err)
		}
		var eps = objs[:0]
		for _, o := range objs {
			if o.GetKind() == "DNSEndpoint" {
				if ns := o.GetNamespace(); ns != "" {
					k.EnsureNamespace(t, ns)
				}
				eps = append(eps, o)
			}
		}
		rel, _ := filepath.Rel(root, f)
		t.Logf("%s: %d DNSEndpoints", rel, len(eps))
		kubectlApply(t, k, eps, "--dry-run=server")
		total += len(eps)
	}
	t.Logf("%d DNSEndpoints in %d files accepted", total, len(files))
}

// TestInvalidDNSEndpointsRejectedByCRD applies DNSEndpoints with the
// mistakes users make; the CRD's schema (through server-side apply's strict
// field validation, kubectl's default) rejects each and names the field.
func TestInvalidDNSEndpointsRejectedByCRD(t *testing.T) {
	k := harness.SharedKube(t)
	k.EnsureNamespace(t, "fleetdns")
	const head = "apiVersion: externaldns.k8s.io/v1alpha1\nkind: DNSEndpoint\nmetadata: {name: bad, namespace: fleetdns}\n"
	for _, c := range []struct {
		name, spec, want string
	}{
		{"targets is a string, not a list", "spec:\n  endpoints:\n  - {dnsName: a.example.com, recordType: A, targets: \"192.0.2.1\"}\n", ".spec.endpoints[0].targets: expected list"},
		{"recordTTL is not a number", "spec:\n  endpoints:\n  - {dnsName: a.example.com, recordType: A, recordTTL: \"1m\", targets: [192.0.2.1]}\n", ".spec.endpoints[0].recordTTL: expected numeric"},
		{"providerSpecific value unquoted number", "spec:\n  endpoints:\n  - dnsName: a.example.com\n    recordType: A\n    targets: [192.0.2.1]\n    providerSpecific:\n    - {name: gslb/ttl, value: 30}\n", ".spec.endpoints[0].providerSpecific[0].value: expected string"},
		{"endpoints is an object", "spec:\n  endpoints:\n    dnsName: a.example.com\n", ".spec.endpoints: expected list"},
		{"endpoint label is not a string", "spec:\n  endpoints:\n  - {dnsName: a.example.com, recordType: A, targets: [192.0.2.1], labels: {weight: 10}}\n", ".spec.endpoints[0].labels.weight: expected string"},
		{"misspelt field target", "spec:\n  endpoints:\n  - {dnsName: a.example.com, recordType: A, target: [192.0.2.1]}\n", ".spec.endpoints[0].target: field not declared in schema"},
	} {
		t.Run(c.name, func(t *testing.T) {
			for _, dry := range [][]string{{"--dry-run=server"}, nil} {
				args := append([]string{"apply", "--server-side", "-f", "-"}, dry...)
				out, err := k.KubectlStdin(head+c.spec, args...)
				if err == nil {
					k.TryKubectl("-n", "fleetdns", "delete", "dnsendpoint", "bad", "--ignore-not-found")
					t.Fatalf("kubectl %s accepted an invalid DNSEndpoint:\n%s%s\n%s", strings.Join(args, " "), head, c.spec, out)
				}
				if !strings.Contains(out, c.want) {
					t.Errorf("kubectl %s: error does not name %q:\n%s", strings.Join(args, " "), c.want, out)
				}
				t.Logf("rejected: %s", strings.TrimSpace(out))
			}
		})
	}
	if out, _ := k.TryKubectl("-n", "fleetdns", "get", "dnsendpoint", "bad"); !strings.Contains(out, "NotFound") {
		t.Errorf("an invalid DNSEndpoint was stored: %s", out)
	}
}

// TestParentKustomizationAppliesWhereNoFleetRuns applies
// deploy/multicluster/parent as docs/multicluster-gslb.md says to on the
// parent zone's cluster, where deploy/gslb never ran: the namespace it
// needs comes with it. The namespace is renamed to one that does not exist
// on the shared API server, so the apply cannot lean on another test's.
func TestParentKustomizationAppliesWhereNoFleetRuns(t *testing.T) {
	k := harness.SharedKube(t)
	objs := k.Kustomize(t, "deploy/multicluster/parent")
	fresh := fmt.Sprintf("parent-%d", time.Now().UnixNano()%1_000_000)
	for _, o := range objs {
		switch {
		case o.GetKind() == "Namespace" && o.GetName() == "fleetdns":
			o.SetName(fresh)
		case o.GetNamespace() == "fleetdns":
			o.SetNamespace(fresh)
		}
	}
	t.Cleanup(func() { k.Kubectl(t, "delete", "namespace", fresh, "--wait=false") })
	kubectlApply(t, k, objs)
	if out := k.Kubectl(t, "-n", fresh, "get", "dnsendpoints", "-o", "name"); !strings.Contains(out, "dnsendpoint.externaldns.k8s.io/gslb-delegation") {
		t.Errorf("after applying the parent tree on a cluster without namespace fleetdns: %q, want the delegation stored", out)
	}
}
