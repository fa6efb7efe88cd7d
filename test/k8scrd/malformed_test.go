package k8scrd_test

import (
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/fleetdns/fleetdns/test/harness"
)

// badEndpoints pass the CRD's schema but cannot be served.
var badEndpoints = []harness.Endpoint{
	{DNSName: "a..b.bad.example", RecordType: "A", Targets: []string{"192.0.2.1"}},
	{DNSName: "addr.bad.example", RecordType: "A", Targets: []string{"not-an-ip"}},
	{DNSName: "v6.bad.example", RecordType: "A", Targets: []string{"2001:db8::1"}},
	{DNSName: "v4.bad.example", RecordType: "AAAA", Targets: []string{"192.0.2.1"}},
	{DNSName: "type.bad.example", RecordType: "BOGUS", Targets: []string{"x"}},
	{DNSName: "cname.bad.example", RecordType: "CNAME", Targets: []string{"a.example.", "b.example."}},
	{DNSName: "mx.bad.example", RecordType: "MX", Targets: []string{"nonsense"}},
	{DNSName: "srv.bad.example", RecordType: "SRV", Targets: []string{"1 2 mail.example"}},
}

// invalidTotal sums coredns_k8scrd_invalid_endpoints_total over its labels.
func invalidTotal(t *testing.T, s *server) float64 {
	t.Helper()
	var sum float64
	re := regexp.MustCompile(`(?m)^coredns_k8scrd_invalid_endpoints_total(?:\{[^}]*\})? (\S+)$`)
	for _, m := range re.FindAllStringSubmatch(harness.HTTPBody(t, s.MetricsURL), -1) {
		v, _ := strconv.ParseFloat(m[1], 64)
		sum += v
	}
	return sum
}

// TestMalformedObjectsAreSkippedAndTheRestServed: invalid endpoints are
// skipped one by one with a log line naming the object and the endpoint, and
// counted; the valid endpoints of the same object and every other object are
// served; fixing the object serves it.
func TestMalformedObjectsAreSkippedAndTheRestServed(t *testing.T) {
	k := harness.SharedKube(t)
	ns := k.NewNamespace(t, "bad")
	mixed := append([]harness.Endpoint{a("ok.bad.example", "192.0.2.10")}, badEndpoints...)
	k.CreateDNSEndpoint(t, ns, "mixed", nil, mixed...)
	k.CreateDNSEndpoint(t, ns, "good", nil, a("good.bad.example", "192.0.2.20"))
	k.Create(t, harness.DNSEndpointObject(ns, "empty", nil)) // no endpoints at all
	srv := startK8sCRD(t, "bad.example.", source{kubeconfig: k.Kubeconfig}, []string{"namespaces " + ns}, nil, true)

	waitA(t, srv.Addr, "ok.bad.example", "192.0.2.10", propagationBound)
	waitA(t, srv.Addr, "good.bad.example", "192.0.2.20", propagationBound)
	for _, e := range badEndpoints[1:] {
		if got := answerA(srv.Addr, e.DNSName); got != "NXDOMAIN" {
			t.Errorf("%s (%s %v, invalid) A = %s, want NXDOMAIN", e.DNSName, e.RecordType, e.Targets, got)
		}
	}
	log := srv.Log()
	for _, e := range badEndpoints {
		if !strings.Contains(log, e.DNSName) || !strings.Contains(log, ns+"/mixed") {
			t.Errorf("no log line names %s/mixed and the invalid endpoint %s", ns, e.DNSName)
		}
	}
	if n := invalidTotal(t, srv); n < float64(len(badEndpoints)) {
		t.Errorf("coredns_k8scrd_invalid_endpoints_total = %v, want at least %d", n, len(badEndpoints))
	}
	if !srv.Running() {
		t.Fatal("coredns exited")
	}

	// Fixing the object serves what was invalid.
	k.SetDNSEndpoints(t, ns, "mixed", a("ok.bad.example", "192.0.2.10"), a("addr.bad.example", "192.0.2.11"))
	waitA(t, srv.Addr, "addr.bad.example", "192.0.2.11", propagationBound)
}

// TestMalformedManifestsAreSkippedAndTheRestServed: in a manifest directory,
// a file that does not parse is skipped with a log line naming the file and
// line, an invalid document or endpoint in a multi-document file costs only
// itself, and everything else is served.
func TestMalformedManifestsAreSkippedAndTheRestServed(t *testing.T) {
	dir := t.TempDir()
	writeManifests(t, dir, "good.yaml", harness.DNSEndpointObject("default", "good", nil, a("good.bad.example", "192.0.2.20")))
	write := func(name, content string) {
		t.Helper()
		if err := os.WriteFile(filepath.Join(dir, name), []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write("broken.yaml", `apiVersion: externaldns.k8s.io/v1alpha1
kind: DNSEndpoint
metadata:
  name: broken
spec:
  endpoints:
  - dnsName: broken.bad.example
    recordType: A
    targets: [192.0.2.30
  - this is not yaml: [
`)
	write("multi.yaml", `apiVersion: externaldns.k8s.io/v1alpha1
kind: DNSEndpoint
metadata: {name: first}
spec:
  endpoints:
  - {dnsName: first.bad.example, recordType: A, targets: [192.0.2.41]}
---
apiVersion: externaldns.k8s.io/v1alpha1
kind: DNSEndpoint
metadata: {name: second}
spec:
  endpoints:
  - {dnsName: second.bad.example, recordType: A, targets: [not-an-ip]}
  - {dnsName: second-ok.bad.example, recordType: A, targets: [192.0.2.42]}
---
apiVersion: externaldns.k8s.io/v1alpha1
kind: DNSEndpoint
metadata: {name: third}
spec:
  endpoints:
  - {dnsName: third.bad.example, recordType: A, targets: [192.0.2.43]}
`)
	srv := startK8sCRD(t, "bad.example.", source{directory: dir}, nil, nil, true)
	for name, want := range map[string]string{
		"good.bad.example": "192.0.2.20", "first.bad.example": "192.0.2.41", "second-ok.bad.example": "192.0.2.42",
		"third.bad.example": "192.0.2.43", "second.bad.example": "NXDOMAIN", "broken.bad.example": "NXDOMAIN",
	} {
		waitA(t, srv.Addr, name, want, propagationBound)
	}
	log := srv.Log()
	if !regexp.MustCompile(`broken\.yaml:\d+`).MatchString(log) {
		t.Errorf("no log line names broken.yaml and a line:\n%s", log)
	}
	if !regexp.MustCompile(`multi\.yaml:\d+.*second\.bad\.example`).MatchString(log) {
		t.Errorf("no log line names multi.yaml, a line and second.bad.example:\n%s", log)
	}

	// A file that breaks later and is then fixed.
	write("good.yaml", "kind: [\n")
	time.Sleep(500 * time.Millisecond)
	waitA(t, srv.Addr, "third.bad.example", "192.0.2.43", propagationBound)
	writeManifests(t, dir, "good.yaml", harness.DNSEndpointObject("default", "good", nil, a("good.bad.example", "192.0.2.21")))
	waitA(t, srv.Addr, "good.bad.example", "192.0.2.21", propagationBound)
	if !srv.Running() {
		t.Fatal("coredns exited")
	}
}
