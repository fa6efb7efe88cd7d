package k8scrd

import (
	"reflect"
	"strings"
	"testing"

	"github.com/fleetdns/fleetdns/plugin/k8scrd/kubefeed"
	"github.com/fleetdns/fleetdns/plugin/k8scrd/object"

	"github.com/coredns/caddy"
)

func TestSetupParsesCorefile(t *testing.T) {
	c := caddy.NewTestController("dns", `k8scrd example.org example.net {
		kubeconfig /etc/kube.conf prod
		namespaces web mail
		labels k8gb.io/dnstype=local,tier in (a,b)
		tenancy strict
		ttl 60
		soa ns1.example.org hostmaster.example.org
		negttl 5
		fallthrough example.net
	}`)
	k, err := parse(c)
	if err != nil {
		t.Fatal(err)
	}
	cfg := k.cfg
	if strings.Join(k.Zones, " ") != "example.org. example.net." || cfg.kubeconfig != "/etc/kube.conf" || cfg.context != "prod" ||
		strings.Join(cfg.namespaces, " ") != "web mail" || cfg.labels != "k8gb.io/dnstype=local,tier in (a,b)" ||
		!cfg.strict || cfg.ttl != 60 || cfg.negTTL != 5 || cfg.mname != "ns1.example.org." || cfg.rname != "hostmaster.example.org." {
		t.Errorf("parsed %+v, zones %v", cfg, k.Zones)
	}
	if !k.Fall.Through("a.example.net.") || k.Fall.Through("a.example.org.") {
		t.Error("fallthrough should cover example.net only")
	}
	if _, ok := k.source.(*kubefeed.Feed); !ok {
		t.Errorf("source is %T, want the Kubernetes source", k.source)
	}
}

func TestSetupDefaults(t *testing.T) {
	k, err := parse(caddy.NewTestController("dns", "k8scrd"))
	if err != nil {
		t.Fatal(err)
	}
	if k.cfg.ttl != 30 || k.cfg.negTTL != 30 || k.cfg.strict || len(k.cfg.namespaces) != 0 {
		t.Errorf("defaults: %+v", k.cfg)
	}
}

func TestSetupRejectsMalformedCorefile(t *testing.T) {
	for _, tc := range []struct{ input, want string }{
		{"k8scrd {\n bogus\n}", `Testfile:2 - Error during parsing: unknown property "bogus"`},
		{"k8scrd {\n tenancy loose\n}", `Testfile:2 - Error during parsing: tenancy "loose"`},
		{"k8scrd {\n ttl -1\n}", `Testfile:2 - Error during parsing: ttl "-1"`},
		{"k8scrd {\n negttl many\n}", `Testfile:2 - Error during parsing: negttl "many"`},
		{"k8scrd {\n ttl 30 40\n}", "Testfile:2 - Error during parsing: Wrong argument count"},
		{"k8scrd {\n soa ns1.example.org\n}", "Testfile:2 - Error during parsing: Wrong argument count"},
		{"k8scrd {\n labels a=b=c\n}", `Testfile:2 - Error during parsing: labels "a=b=c"`},
		{"k8scrd {\n kubeconfig\n}", "Testfile:2 - Error during parsing: Wrong argument count"},
		{"k8scrd {\n namespaces\n}", "Testfile:2 - Error during parsing: Wrong argument count"},
		{"k8scrd {\n directory /tmp\n kubeconfig /k\n}", "Testfile:3 - Error during parsing: directory and kubeconfig exclude each other"},
		{"k8scrd { ttl 30 40 }", "Testfile:1 - Error during parsing: Wrong argument count or unexpected line ending after '40'"},
		{"k8scrd { ttl }", "Testfile:1 - Error during parsing: Wrong argument count or unexpected line ending after 'ttl'"},
		{"k8scrd { bogus }", `Testfile:1 - Error during parsing: unknown property "bogus"`},
		{"k8scrd { tenancy loose }", `Testfile:1 - Error during parsing: tenancy "loose"`},
		{"k8scrd {\n ttl 60\n negttl many }", `Testfile:3 - Error during parsing: negttl "many"`},
	} {
		_, err := parse(caddy.NewTestController("dns", tc.input))
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%q: error %v, want it to contain %q", tc.input, err, tc.want)
		}
	}
}

func TestSetupMissingDirectoryFailsStart(t *testing.T) {
	k, err := parse(caddy.NewTestController("dns", "k8scrd example.org {\n directory /nonexistent/k8scrd\n}"))
	if err != nil {
		t.Fatal(err)
	}
	if err := k.start(); err == nil || !strings.Contains(err.Error(), "/nonexistent/k8scrd") {
		t.Errorf("start: %v, want an error naming the directory", err)
	}
	k.shutdown()
}

func TestSetupOneLineBlockIsTheMultiLineBlock(t *testing.T) {
	for _, property := range []string{
		"kubeconfig /etc/kube.conf",
		"kubeconfig /etc/kube.conf prod",
		"directory /etc/zones",
		"namespaces web mail",
		"labels tier in (a,b)",
		"tenancy strict",
		"ttl 60",
		"negttl 5",
		"soa ns1.example.org hostmaster.example.org",
		"fallthrough",
		"fallthrough example.net",
	} {
		multi, err := parse(caddy.NewTestController("dns", "k8scrd example.org example.net {\n "+property+"\n}"))
		if err != nil {
			t.Fatalf("%s: %v", property, err)
		}
		oneLine := "k8scrd example.org example.net { " + property + " }"
		one, err := parse(caddy.NewTestController("dns", oneLine))
		if err != nil {
			t.Errorf("%q: %v", oneLine, err)
			continue
		}
		if !reflect.DeepEqual(one.cfg, multi.cfg) || !reflect.DeepEqual(one.Fall, multi.Fall) {
			t.Errorf("%q parsed to %+v %v, want %+v %v as on several lines", oneLine, one.cfg, one.Fall, multi.cfg, multi.Fall)
		}
	}
	// The last property may share the closing line of a longer block.
	k, err := parse(caddy.NewTestController("dns", "k8scrd {\n ttl 60\n negttl 5 }"))
	if err != nil || k.cfg.ttl != 60 || k.cfg.negTTL != 5 {
		t.Errorf("closing brace after the last property: %v, cfg %+v", err, k.cfg)
	}
}

func TestSetupParsesSources(t *testing.T) {
	k, err := parse(caddy.NewTestController("dns", `k8scrd example.org {
		resources dnsendpoint Ingress Service HTTPRoute GRPCRoute TLSRoute Ingress
		ingress_class nginx internal
		gateway_class eg
		resolver 127.0.0.53 [::1]:5353
	}`))
	if err != nil {
		t.Fatal(err)
	}
	cfg := k.cfg
	if got := strings.Join(cfg.resources, " "); got != "DNSEndpoint Ingress Service HTTPRoute GRPCRoute TLSRoute" {
		t.Errorf("resources = %q", got)
	}
	if strings.Join(cfg.IngressClasses, " ") != "nginx internal" || strings.Join(cfg.GatewayClasses, " ") != "eg" {
		t.Errorf("classes = %v, %v", cfg.IngressClasses, cfg.GatewayClasses)
	}
	if got := strings.Join(cfg.resolvers, " "); got != "127.0.0.53:53 [::1]:5353" {
		t.Errorf("resolvers = %q", got)
	}
	if d, err := parse(caddy.NewTestController("dns", "k8scrd")); err != nil || !reflect.DeepEqual(d.cfg.resources, []string{object.KindDNSEndpoint}) {
		t.Errorf("default resources = %v (%v), want DNSEndpoint only", d.cfg.resources, err)
	}
}

func TestSetupRejectsMalformedSources(t *testing.T) {
	for _, tc := range []struct{ input, want string }{
		{"k8scrd {\n resources Ingress Deployment\n}", `Testfile:2 - Error during parsing: resources "Deployment": want some of DNSEndpoint Ingress Service HTTPRoute GRPCRoute TLSRoute`},
		{"k8scrd {\n resources\n}", "Testfile:2 - Error during parsing: Wrong argument count"},
		{"k8scrd {\n ingress_class\n}", "Testfile:2 - Error during parsing: Wrong argument count"},
		{"k8scrd {\n gateway_class\n}", "Testfile:2 - Error during parsing: Wrong argument count"},
		{"k8scrd {\n resolver\n}", "Testfile:2 - Error during parsing: Wrong argument count"},
		{"k8scrd {\n resolver not..an..address\n}", "Testfile:2 - Error during parsing: resolver: "},
	} {
		_, err := parse(caddy.NewTestController("dns", tc.input))
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%q: error %v, want %q", tc.input, err, tc.want)
		}
	}
}
