package bounds_test

import (
	"fmt"
	"os"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/fleetdns/fleetdns/internal/testkit"
	"github.com/fleetdns/fleetdns/test/harness"

	"github.com/miekg/dns"
)

// localized makes the shipped GSLB Corefile run here: bound to ip, its
// HTTP endpoints on loopback ports, k8scrd reading the test's API server.
func localized(t *testing.T, corefile, ip, kubeconfig string) (string, string) {
	t.Helper()
	metrics := harness.HostPort(t, ip)
	r := strings.NewReplacer(
		"gslb.example.com:53 {\n", "gslb.example.com:53 {\n    bind "+ip+"\n",
		"prometheus :9153", "prometheus "+metrics,
		"    health {", "    health "+harness.HostPort(t, ip)+" {",
		"    ready\n", "    ready "+harness.HostPort(t, ip)+"\n",
		"    k8scrd gslb.example.com {\n", "    k8scrd gslb.example.com {\n       kubeconfig "+kubeconfig+"\n",
		// Secret fleetdns-fleet-key, which the kubelet would mount.
		"key /etc/fleetdns/fleet/fleet.key", "key "+harness.FleetKeyFile(t),
	)
	out := r.Replace(corefile)
	for _, want := range []string{"bind ", "prometheus " + metrics, "kubeconfig "} {
		if !strings.Contains(out, want) {
			t.Fatalf("the shipped Corefile changed shape (no %q after substitution):\n%s", want, out)
		}
	}
	return out, metrics
}

var reRRL = regexp.MustCompile(`(?s)\n\s*rrl \{.*?\n\s*\}`)

// TestAmplificationOfTheShippedGSLBStanza (finding 4): deploy/gslb's
// Corefile as shipped (addresses on loopback, k8scrd on the test's API
// server), and with its rrl and bufsize lines taken out, asked 100 times
// back to back from one spoofable address at EDNS 65535 with DO: an 8 KB
// TXT (answered by k8scrd), 250 A and 250 AAAA targets (answered by gslb,
// max_targets 64). The shipped stanza stays under 10x for each; the
// variants without rrl and bufsize run with FLEETDNS_BENCH=1 (figures).
//
// deploy/kube-system's block is cluster-internal (the kube-dns Service,
// never reachable from the Internet) and deploy/sidecar's binds
// 127.0.0.1 in the pod: neither is measured here.
func TestAmplificationOfTheShippedGSLBStanza(t *testing.T) {
	harness.RequirePlugins(t, "rrl")
	k := harness.SharedKube(t)
	k.EnsureNamespace(t, "fleetdns")
	var txt []string
	for range 32 {
		txt = append(txt, strings.Repeat("t", 250))
	}
	const (
		txtName = "txt.gslb.example.com."
		aName   = "www.gslb.example.com."
	)
	var as, aaaas []string
	for i := range 250 {
		as = append(as, fmt.Sprintf("127.60.%d.%d", i/200, 1+i%200))
		aaaas = append(aaaas, fmt.Sprintf("fd00:60::%x", i+1))
	}
	obj := harness.DNSEndpointObject("fleetdns", "amplification", nil,
		testkit.Endpoint{DNSName: strings.TrimSuffix(txtName, "."), RecordType: "TXT", Targets: []string{strings.Join(txt, "")}},
		testkit.Endpoint{DNSName: strings.TrimSuffix(aName, "."), RecordType: "A", Targets: as},
		testkit.Endpoint{DNSName: strings.TrimSuffix(aName, "."), RecordType: "AAAA", Targets: aaaas})
	k.Create(t, obj)
	t.Cleanup(func() { k.Delete(t, obj) })

	parentIP := harness.NewIP(t)
	p := startParentAt(t, parentIP, "gslb.example.com", map[string]string{"gslb-ns-eu.gslb.example.com": "127.0.0.1"})
	shipped := harness.ShippedCorefile(t, "deploy/gslb/configmap.yaml", "fleetdns-gslb")
	if !strings.Contains(shipped, "bufsize 1232") || !reRRL.MatchString(shipped) {
		t.Fatalf("the shipped GSLB stanza lost bufsize 1232 or rrl:\n%s", shipped)
	}
	n := 100
	if os.Getenv("FLEETDNS_BENCH") == "1" {
		n = 400
	}
	for _, v := range []struct {
		name  string
		edit  func(string) string
		limit float64 // the most bytes out per byte in, 0: reported only
	}{
		{"as shipped (bufsize 1232, rrl)", func(s string) string { return s }, 10},
		{"without rrl", func(s string) string { return reRRL.ReplaceAllString(s, "") }, 0},
		{"without bufsize and rrl", func(s string) string {
			return strings.Replace(reRRL.ReplaceAllString(s, ""), "\n    bufsize 1232", "", 1)
		}, 0},
	} {
		if v.limit == 0 && os.Getenv("FLEETDNS_BENCH") != "1" {
			continue // the stanza without its bounds: a figure for RELIABILITY.md, not a check
		}
		ip := harness.NewIP(t)
		corefile, _ := localized(t, v.edit(shipped), ip, k.Kubeconfig)
		srv := harness.StartCoreDNS(t, corefile, harness.WithProbe(txtName, dns.TypeTXT), harness.WithStartTimeout(60*time.Second),
			harness.WithEnv("FLEETDNS_GEOTAG=eu", "FLEETDNS_PARENT_NS="+p.Addr))
		testkit.Eventually(t, 20*time.Second, "gslb answers www", func() (bool, string) {
			m := answer(t, srv.Addr, aName, dns.TypeA)
			return len(m.Answer) > 0 || m.Truncated, fmt.Sprintf("%s A: %d answers", aName, len(m.Answer))
		})
		client := harness.NewIP(t)
		for _, q := range []struct {
			name  string
			qtype uint16
			via   string
		}{{txtName, dns.TypeTXT, "k8scrd"}, {aName, dns.TypeA, "gslb"}, {aName, dns.TypeAAAA, "gslb"}} {
			ans, tc, lost, in, out := harness.Burst(client, srv.Addr, q.name, q.qtype, 65535, true, n)
			f := float64(out) / float64(in)
			t.Logf("%-32s %-4s via %-6s: %3d answered, %3d truncated, %3d dropped; %6d bytes in, %8d out: %6.1fx",
				v.name, dns.TypeToString[q.qtype], q.via, ans, tc, lost, in, out, f)
			if v.limit > 0 && f > v.limit {
				t.Errorf("%s, %s %s: amplification %.1fx, want at most %vx", v.name, q.name, dns.TypeToString[q.qtype], f, v.limit)
			}
		}
		srv.Stop()
	}
}
