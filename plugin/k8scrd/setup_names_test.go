package k8scrd

import (
	"slices"
	"strings"
	"testing"

	"github.com/fleetdns/fleetdns/plugin/k8scrd/derive"
	"github.com/fleetdns/fleetdns/plugin/k8scrd/object"

	"github.com/coredns/caddy"
	"github.com/miekg/dns"
)

func TestK8sGatewayWordsRejected(t *testing.T) {
	for _, body := range []string{
		"hostname_annotation",
		"hostname_annotation example.com/hostname",
		"hostname_annotation coredns.io/hostname coredns.io/hostname",
		"service_names yes",
		"relative_hosts on",
	} {
		var n derive.NameConventions
		c := caddy.NewTestController("dns", "k8scrd {\n"+body+"\n}")
		c.Next()
		c.NextBlock()
		err := parseNameConvention(c, &n)
		if err == nil || !strings.Contains(err.Error(), "Testfile:2") {
			t.Errorf("%q: error %v, want one naming line 2", body, err)
		}
	}
}

func TestSetupParsesK8sGatewayWords(t *testing.T) {
	k, err := parse(caddy.NewTestController("dns", `k8scrd example.org {
		resources Ingress Service
		hostname_annotation coredns.io/hostname external-dns.alpha.kubernetes.io/hostname
		service_names
		relative_hosts
	}`))
	if err != nil {
		t.Fatal(err)
	}
	n := k.cfg.Names
	if !slices.Equal(n.Annotations, []string{object.AnnotationK8sGatewayHostname, object.AnnotationHostname}) || !n.ServiceNames || !n.RelativeHosts {
		t.Errorf("names = %+v", n)
	}
	d, err := parse(caddy.NewTestController("dns", "k8scrd"))
	if err != nil {
		t.Fatal(err)
	}
	if n := d.cfg.Names; len(n.Annotations) != 0 || n.ServiceNames || n.RelativeHosts {
		t.Errorf("default names = %+v, want external-dns's conventions alone", n)
	}
	_, err = parse(caddy.NewTestController("dns", "k8scrd {\n    resources Service\n    service_names please\n}"))
	if err == nil || !strings.Contains(err.Error(), "Testfile:3") {
		t.Errorf("service_names with an argument: %v, want an error naming line 3", err)
	}
}

// The words hold for manifests in a folder too (the directory feed, and
// the lint that reads folders).
func TestK8sGatewayWordsInADirectory(t *testing.T) {
	const svcs = `apiVersion: v1
kind: Service
metadata: {name: test, namespace: default}
spec: {type: LoadBalancer}
status: {loadBalancer: {ingress: [{ip: 192.0.2.3}]}}
---
apiVersion: v1
kind: Service
metadata:
  name: annotated
  namespace: default
  annotations: {coredns.io/hostname: "good.ok, *.apps"}
spec: {type: LoadBalancer}
status: {loadBalancer: {ingress: [{ip: 192.0.2.5}]}}
`
	words := "resources Service\nhostname_annotation coredns.io/hostname external-dns.alpha.kubernetes.io/hostname\nservice_names\nrelative_hosts"
	k, _ := newTestPlugin(t, "example.org", words, map[string]string{"svc.yaml": svcs})
	for name, want := range map[string]string{
		"test.default.example.org.": "192.0.2.3",
		"good.ok.example.org.":      "192.0.2.5",
		"x.apps.example.org.":       "192.0.2.5",
	} {
		m, _ := ask(t, k, name, dns.TypeA)
		if m == nil || m.Rcode != dns.RcodeSuccess || len(m.Answer) != 1 || m.Answer[0].(*dns.A).A.String() != want {
			t.Errorf("%s A: %v, want %s", name, m, want)
		}
	}
	off, _ := newTestPlugin(t, "example.org", "resources Service", map[string]string{"svc.yaml": svcs})
	for _, name := range []string{"test.default.example.org.", "good.ok.example.org."} {
		if m, _ := ask(t, off, name, dns.TypeA); m == nil || m.Rcode != dns.RcodeNameError {
			t.Errorf("%s A without the words: %v, want NXDOMAIN", name, m)
		}
	}
}
