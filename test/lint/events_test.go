package lint_test

import (
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/fleetdns/fleetdns/internal/testkit"
	"github.com/fleetdns/fleetdns/test/harness"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// skippedObjects each name a host that the block below does not serve,
// for a reason other than tenancy: another Ingress class, k8s_gateway's
// annotation, k8s_gateway's NAME.NAMESPACE of a LoadBalancer Service and
// its host relative to the zone (k8s_gateway's naming words off), a
// DNSEndpoint whose only name is outside the zone.
const skippedObjects = `apiVersion: networking.k8s.io/v1
kind: Ingress
metadata: {name: relative, namespace: NAMESPACE}
spec:
  ingressClassName: nginx
  rules: [{host: myapp}]
---
apiVersion: v1
kind: Service
metadata: {name: plain, namespace: NAMESPACE}
spec:
  type: LoadBalancer
  ports: [{port: 80}]
---
apiVersion: networking.k8s.io/v1
kind: Ingress
metadata: {name: other-class, namespace: NAMESPACE}
spec:
  ingressClassName: traefik
  rules: [{host: web.skip.example}]
---
apiVersion: v1
kind: Service
metadata: {name: k8sgw, namespace: NAMESPACE, annotations: {coredns.io/hostname: svc.skip.example}}
spec:
  type: LoadBalancer
  ports: [{port: 80}]
---
apiVersion: externaldns.k8s.io/v1alpha1
kind: DNSEndpoint
metadata: {name: elsewhere, namespace: NAMESPACE}
spec:
  endpoints:
  - {dnsName: www.elsewhere.example, recordType: A, targets: [192.0.2.1]}
---
apiVersion: externaldns.k8s.io/v1alpha1
kind: DNSEndpoint
metadata: {name: served, namespace: NAMESPACE}
spec:
  endpoints:
  - {dnsName: ok.skip.example, recordType: A, targets: [192.0.2.2]}
`

// TestSkippedNamesReportedAsTheLintSaysThem: what the lint prints for a
// folder before it is applied, the Events on the objects say once it is:
// the same reason (NameSkipped) and the same words.
func TestSkippedNamesReportedAsTheLintSaysThem(t *testing.T) {
	k := harness.SharedKube(t)
	ns := k.NewNamespace(t, "skip")
	manifests := strings.ReplaceAll(skippedObjects, "NAMESPACE", ns)
	stanza := fmt.Sprintf("namespaces %s\n        resources DNSEndpoint Ingress Service\n        ingress_class nginx", ns)

	// Before: the lint, on the manifests as they would be applied.
	dir := t.TempDir()
	writeFile(t, filepath.Join(dir, "m", "objects.yaml"), manifests)
	cf := writeFile(t, filepath.Join(dir, "Corefile"), "skip.example:53 {\n    k8scrd {\n        "+stanza+"\n    }\n}\n")
	code, out := lint(t, filepath.Join(dir, "m"), cf)
	if code != 1 {
		t.Fatalf("lint: exit %d, want 1:\n%s", code, out)
	}
	said := map[string]string{} // object name -> the lint's NameSkipped message
	for _, l := range strings.Split(out, "\n") {
		_, rest, ok := strings.Cut(l, ": NameSkipped: ")
		if !ok {
			continue
		}
		head, _, _ := strings.Cut(l, ": NameSkipped: ")
		name := head[strings.LastIndexByte(head, '/')+1:]
		said[name] = rest
	}
	for _, name := range []string{"other-class", "k8sgw", "elsewhere", "plain", "relative"} {
		if said[name] == "" {
			t.Errorf("the lint says nothing skipped of %s:\n%s", name, out)
		}
	}
	if _, ok := said["served"]; ok {
		t.Errorf("the lint says a served object is skipped:\n%s", out)
	}

	// After: the objects applied, the server running, the Events.
	k.Apply(t, manifests)
	ip := harness.NewIP(t)
	ready := harness.HostPort(t, ip)
	harness.StartCoreDNS(t, fmt.Sprintf("skip.example:53 {\n    bind %s\n    k8scrd {\n        kubeconfig %s\n        %s\n    }\n    ready %s\n}\n", ip, k.Kubeconfig, stanza, ready),
		harness.WithReadyURL("http://"+ready+"/ready"))

	for name, reason := range map[string]string{"k8sgw": "k8s_gateway_annotation", "plain": "k8s_gateway_service_name", "relative": "k8s_gateway_relative_host"} {
		if !strings.Contains(said[name], "("+reason+"): ") {
			t.Errorf("the lint says of %s %q, not k8sgateway.go's reason %s", name, said[name], reason)
		}
	}

	// A name outside the zones and a LoadBalancer Service's NAME.NAMESPACE
	// are the lint's alone: in a cluster most such names are another
	// server's, or not meant for DNS, and an Event would say otherwise.
	events := func(name, kind string) []string {
		l, err := k.Clientset().CoreV1().Events(ns).List(harness.Context(t), metav1.ListOptions{
			FieldSelector: "involvedObject.name=" + name + ",involvedObject.kind=" + kind})
		if err != nil {
			t.Fatal(err)
		}
		var msgs []string
		for _, e := range l.Items {
			msgs = append(msgs, e.Type+" "+e.Reason+": "+e.Message)
		}
		return msgs
	}
	defer func() {
		for _, c := range []struct{ name, kind string }{{"elsewhere", "DNSEndpoint"}, {"plain", "Service"}} {
			if msgs := events(c.name, c.kind); len(msgs) > 0 {
				t.Errorf("Events on %s %s, want none (the lint's alone): %q", c.kind, c.name, msgs)
			}
		}
	}()
	for _, c := range []struct{ name, kind string }{{"other-class", "Ingress"}, {"k8sgw", "Service"}, {"relative", "Ingress"}} {
		testkit.Eventually(t, 15*time.Second, "a NameSkipped Event on "+c.kind+" "+c.name+" saying what the lint said", func() (bool, string) {
			l, err := k.Clientset().CoreV1().Events(ns).List(harness.Context(t), metav1.ListOptions{
				FieldSelector: "involvedObject.name=" + c.name + ",involvedObject.kind=" + c.kind})
			if err != nil {
				return false, err.Error()
			}
			var msgs []string
			for _, e := range l.Items {
				msgs = append(msgs, e.Type+" "+e.Reason+": "+e.Message)
				if e.Type == "Warning" && e.Reason == "NameSkipped" && strings.Contains(e.Message, said[c.name]) {
					return true, ""
				}
			}
			return false, fmt.Sprintf("lint said %q; Events: %q", said[c.name], msgs)
		})
	}
}
