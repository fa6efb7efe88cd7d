package k8scrd_test

import (
	"strings"
	"testing"
	"time"

	"github.com/fleetdns/fleetdns/internal/testkit"
	"github.com/fleetdns/fleetdns/test/harness"
)

// propagationBound is the generous bound a single change must meet in the
// functional tests (the goal, p99 < 250 ms, is measured in
// TestPropagationDelay).
const propagationBound = 10 * time.Second

// digStatus runs the real dig and returns its status (NOERROR, NXDOMAIN, ...)
// and +short-style answer lines.
func digStatus(t *testing.T, addr, name, qtype string) (string, []string) {
	t.Helper()
	out := harness.Dig(t, addr, "+norec", "+time=1", "+tries=2", "+noall", "+comments", "+answer", name, qtype)
	status := ""
	if i := strings.Index(out, "status: "); i >= 0 {
		status = strings.TrimRight(strings.Fields(out[i+len("status: "):])[0], ",")
	}
	var data []string
	for _, l := range strings.Split(out, "\n") {
		if l == "" || strings.HasPrefix(l, ";") {
			continue
		}
		f := strings.Fields(l)
		if len(f) >= 5 {
			data = append(data, f[3]+" "+strings.Join(f[4:], " "))
		}
	}
	return status, data
}

func waitDig(t *testing.T, addr, name, qtype, wantStatus string, want ...string) {
	t.Helper()
	testkit.Eventually(t, propagationBound, "the change served", func() (bool, string) {
		status, data := digStatus(t, addr, name, qtype)
		ok := status == wantStatus && strings.Join(data, "|") == strings.Join(want, "|")
		return ok, "dig " + name + " " + qtype + ": " + status + " " + strings.Join(data, "|") + "; want " + wantStatus + " " + strings.Join(want, "|")
	})
}

// TestCreateUpdateDeleteReachDig: what kubectl-level changes to DNSEndpoints
// do is what dig sees, without a restart.
func TestCreateUpdateDeleteReachDig(t *testing.T) {
	k := harness.SharedKube(t)
	ns := k.NewNamespace(t, "crud")
	srv := startK8sCRD(t, "crud.example.", source{kubeconfig: k.Kubeconfig}, []string{"namespaces " + ns}, nil, true)

	waitDig(t, srv.Addr, "www.crud.example", "A", "NXDOMAIN")
	k.CreateDNSEndpoint(t, ns, "www", nil, a("www.crud.example", "192.0.2.1"))
	waitDig(t, srv.Addr, "www.crud.example", "A", "NOERROR", "A 192.0.2.1")

	k.SetDNSEndpoints(t, ns, "www", a("www.crud.example", "192.0.2.2", "192.0.2.3"),
		harness.Endpoint{DNSName: "www.crud.example", RecordType: "AAAA", Targets: []string{"2001:db8::1"}})
	waitDig(t, srv.Addr, "www.crud.example", "A", "NOERROR", "A 192.0.2.2", "A 192.0.2.3")
	waitDig(t, srv.Addr, "www.crud.example", "AAAA", "NOERROR", "AAAA 2001:db8::1")

	// A second object adds to the same name; removing it takes its part away.
	k.CreateDNSEndpoint(t, ns, "www-extra", nil, a("www.crud.example", "192.0.2.9"))
	waitDig(t, srv.Addr, "www.crud.example", "A", "NOERROR", "A 192.0.2.2", "A 192.0.2.3", "A 192.0.2.9")
	k.DeleteDNSEndpoint(t, ns, "www-extra")
	waitDig(t, srv.Addr, "www.crud.example", "A", "NOERROR", "A 192.0.2.2", "A 192.0.2.3")

	// Dropping the A endpoint leaves the name with AAAA only: NODATA.
	k.SetDNSEndpoints(t, ns, "www", harness.Endpoint{DNSName: "www.crud.example", RecordType: "AAAA", Targets: []string{"2001:db8::1"}})
	waitDig(t, srv.Addr, "www.crud.example", "A", "NOERROR")

	k.DeleteDNSEndpoint(t, ns, "www")
	waitDig(t, srv.Addr, "www.crud.example", "AAAA", "NXDOMAIN")
	// The zone itself stays: its SOA answers.
	waitDig(t, srv.Addr, "crud.example", "NS", "NOERROR", "NS ns1.crud.example.")
}

// TestNamespaceFilter: `namespaces` serves only the listed namespaces, and a
// change in another namespace never shows.
func TestNamespaceFilter(t *testing.T) {
	k := harness.SharedKube(t)
	ns1, ns2, other := k.NewNamespace(t, "nsf-a"), k.NewNamespace(t, "nsf-b"), k.NewNamespace(t, "nsf-other")
	k.CreateDNSEndpoint(t, ns1, "one", nil, a("one.nsf.example", "192.0.2.1"))
	k.CreateDNSEndpoint(t, ns2, "two", nil, a("two.nsf.example", "192.0.2.2"))
	k.CreateDNSEndpoint(t, other, "three", nil, a("three.nsf.example", "192.0.2.3"), a("one.nsf.example", "192.0.2.33"))
	srv := startK8sCRD(t, "nsf.example.", source{kubeconfig: k.Kubeconfig}, []string{"namespaces " + ns1 + " " + ns2}, nil, true)

	waitA(t, srv.Addr, "one.nsf.example", "192.0.2.1", propagationBound)
	waitA(t, srv.Addr, "two.nsf.example", "192.0.2.2", propagationBound)
	if got := answerA(srv.Addr, "three.nsf.example"); got != "NXDOMAIN" {
		t.Errorf("three.nsf.example (namespace %s, not listed) A = %s, want NXDOMAIN", other, got)
	}
	// A later change outside the filter, then one inside: once the inside
	// one shows, the outside one has had its chance and must not show.
	k.CreateDNSEndpoint(t, other, "four", nil, a("four.nsf.example", "192.0.2.4"))
	k.CreateDNSEndpoint(t, ns2, "five", nil, a("five.nsf.example", "192.0.2.5"))
	waitA(t, srv.Addr, "five.nsf.example", "192.0.2.5", propagationBound)
	if got := answerA(srv.Addr, "four.nsf.example"); got != "NXDOMAIN" {
		t.Errorf("four.nsf.example (namespace %s, not listed) A = %s, want NXDOMAIN", other, got)
	}
}

// TestLabelFilter: `labels` serves only matching objects; relabelling an
// object in or out of the selector adds or removes its records.
func TestLabelFilter(t *testing.T) {
	k := harness.SharedKube(t)
	ns := k.NewNamespace(t, "labels")
	local := map[string]string{"k8gb.io/dnstype": "local"}
	k.CreateDNSEndpoint(t, ns, "in", local, a("in.labels.example", "192.0.2.1"))
	k.CreateDNSEndpoint(t, ns, "out", map[string]string{"k8gb.io/dnstype": "extdns"}, a("out.labels.example", "192.0.2.2"))
	k.CreateDNSEndpoint(t, ns, "bare", nil, a("bare.labels.example", "192.0.2.3"))
	srv := startK8sCRD(t, "labels.example.", source{kubeconfig: k.Kubeconfig},
		[]string{"namespaces " + ns, "labels k8gb.io/dnstype=local"}, nil, true)

	waitA(t, srv.Addr, "in.labels.example", "192.0.2.1", propagationBound)
	for _, name := range []string{"out.labels.example", "bare.labels.example"} {
		if got := answerA(srv.Addr, name); got != "NXDOMAIN" {
			t.Errorf("%s (label does not match) A = %s, want NXDOMAIN", name, got)
		}
	}
	k.SetDNSEndpointLabels(t, ns, "bare", local)
	waitA(t, srv.Addr, "bare.labels.example", "192.0.2.3", propagationBound)
	k.SetDNSEndpointLabels(t, ns, "in", map[string]string{"k8gb.io/dnstype": "extdns"})
	waitA(t, srv.Addr, "in.labels.example", "NXDOMAIN", propagationBound)
}
