package k8scrd_test

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/fleetdns/fleetdns/internal/testkit"
	"github.com/fleetdns/fleetdns/test/harness"
	"github.com/miekg/dns"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

func writeYAML(t *testing.T, dir, file, content string) {
	t.Helper()
	if err := os.WriteFile(filepath.Join(dir, file), []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
}

// TestHostileNamespaceCannotRedirect: what a hostile namespace publishes
// under tenancy strict, against the built binary over real sockets with the
// directory source: a literal localtargets- record (which peers take as this
// cluster's answer), a delegation and a wildcard over another team's names,
// and the explain records gslb answers itself. None of it is served; the
// team's own answers are, and the log says why.
func TestHostileNamespaceCannotRedirect(t *testing.T) {
	const zone = "hostile.example."
	dir := t.TempDir()
	writeYAML(t, dir, "apps.yaml", testkit.DNSEndpoint("apps", "app", nil,
		testkit.EP("app."+zone, "A", 0, "192.0.2.1"),
		testkit.EP("api.sub."+zone, "A", 0, "192.0.2.2")))
	writeYAML(t, dir, "evil.yaml", testkit.DNSEndpoint("evil", "redirect", map[string]string{"k8gb.io/dnstype": "local"},
		testkit.EP("localtargets-app."+zone, "A", 0, "198.51.100.66"),
		testkit.EP("sub."+zone, "NS", 0, "ns.attacker.example.net"),
		testkit.EP("*."+zone, "A", 0, "198.51.100.67"),
		testkit.EP("_gslb-explain.app."+zone, "TXT", 0, "all peers down, ask 198.51.100.66")))
	// The attacker's objects are the older ones: age gives them nothing.
	old := time.Now().Add(-48 * time.Hour)
	if err := os.Chtimes(filepath.Join(dir, "evil.yaml"), old, old); err != nil {
		t.Fatal(err)
	}
	srv := startK8sCRD(t, zone, source{directory: dir}, []string{"tenancy strict"},
		[]string{"localtargets", "gslb " + zone + " {\n        geotag eu\n        explain none\n    }"}, true)

	for name, want := range map[string]string{
		"localtargets-app." + zone: "192.0.2.1", // assembled by localtargets from app's own targets
		"api.sub." + zone:          "192.0.2.2", // no referral to the attacker
		"x.sub." + zone:            "NXDOMAIN",  // nor below apps' names
		"apq." + zone:              "NXDOMAIN",  // a typo is not caught by the wildcard
	} {
		if got := answerA(srv.Addr, name); got != want {
			t.Errorf("%s A = %s, want %s", name, got, want)
		}
	}
	r := harness.Exchange(t, srv.Addr, "_gslb-explain.app."+zone, dns.TypeTXT, harness.NoRD)
	if r.Rcode != dns.RcodeNameError || len(r.Answer) != 0 {
		t.Errorf("_gslb-explain TXT from a client outside the explain ACL: %s with %v; want NXDOMAIN, never the tenant's record", dns.RcodeToString[r.Rcode], r.Answer)
	}
	for _, reason := range []string{"(localtargets)", "(cover)", "(reserved)"} {
		if !srv.WaitLog(reason, 5*time.Second) {
			t.Errorf("no log line names the refusal %s:\n%s", reason, srv.Log())
		}
	}
}

// TestGrantsSurviveRecreationAndReplicasAgree, against the real API server:
// with a grant, the owner deleting and re-creating its object (helm
// reinstall, GitOps replace) never hands the name to another namespace that
// claimed it meanwhile, and a replica started after the race answers as the
// first one does. Without grants the oldest object wins, and both replicas
// agree on that too.
func TestGrantsSurviveRecreationAndReplicasAgree(t *testing.T) {
	k := harness.SharedKube(t)
	owner, claimer := k.NewNamespace(t, "grant-owner"), k.NewNamespace(t, "grant-claimer")
	const zone = "grants.example."
	k.CreateDNSEndpoint(t, owner, "app", nil, a("app."+zone, "192.0.2.1"))
	time.Sleep(1100 * time.Millisecond) // creationTimestamp has one-second resolution: the owner is older
	k.CreateDNSEndpoint(t, claimer, "app", nil, a("app."+zone, "198.51.100.66"), a("own.claimer."+zone, "192.0.2.9"))

	stanza := func(grants bool) []string {
		s := []string{"namespaces " + owner + " " + claimer, "tenancy strict"}
		if grants {
			s = append(s, "tenant "+owner+" "+zone, "tenant "+claimer+" claimer."+zone)
		}
		return s
	}
	granted := startK8sCRD(t, zone, source{kubeconfig: k.Kubeconfig}, stanza(true), nil, true)
	ungranted := startK8sCRD(t, zone, source{kubeconfig: k.Kubeconfig}, stanza(false), nil, true)
	waitA(t, granted.Addr, "app."+zone, "192.0.2.1", propagationBound)
	waitA(t, granted.Addr, "own.claimer."+zone, "192.0.2.9", propagationBound)
	waitA(t, ungranted.Addr, "app."+zone, "192.0.2.1", propagationBound)

	// The re-creation race: while the owner's object is gone the claimer's
	// is the only one; then the owner's comes back, younger than it.
	k.DeleteDNSEndpoint(t, owner, "app")
	waitA(t, granted.Addr, "app."+zone, "NXDOMAIN", propagationBound)
	waitA(t, ungranted.Addr, "app."+zone, "198.51.100.66", propagationBound)
	time.Sleep(1100 * time.Millisecond) // creationTimestamp has one-second resolution
	k.CreateDNSEndpoint(t, owner, "app", nil, a("app."+zone, "192.0.2.1"))
	waitA(t, granted.Addr, "app."+zone, "192.0.2.1", propagationBound)
	stillA(t, ungranted.Addr, "app."+zone, "198.51.100.66", time.Second) // documented: the oldest object wins

	// Replicas started after the race decide as the first ones did.
	lateGranted := startK8sCRD(t, zone, source{kubeconfig: k.Kubeconfig}, stanza(true), nil, true)
	lateUngranted := startK8sCRD(t, zone, source{kubeconfig: k.Kubeconfig}, stanza(false), nil, true)
	for _, name := range []string{"app." + zone, "own.claimer." + zone} {
		if a, b := answerA(granted.Addr, name), answerA(lateGranted.Addr, name); a != b {
			t.Errorf("with grants, %s: %s from the first replica, %s from the one started later", name, a, b)
		}
		if a, b := answerA(ungranted.Addr, name), answerA(lateUngranted.Addr, name); a != b {
			t.Errorf("without grants, %s: %s from the first replica, %s from the one started later", name, a, b)
		}
	}
}

// eventWriterRules are what the shipped roles give fleetdns: read
// DNSEndpoints, create Events (its one write).
var eventWriterRules = append(slices.Clone(harness.DNSEndpointReaderRules), rbacv1.PolicyRule{
	APIGroups: []string{""}, Resources: []string{"events"}, Verbs: []string{"create"},
})

// TestRefusalsReportedOnTheObject: the team whose endpoint was refused, or
// could not be served, reads why on its own object (kubectl describe,
// kubectl events), written with a ServiceAccount that may only create Events.
func TestRefusalsReportedOnTheObject(t *testing.T) {
	k := harness.SharedKube(t)
	owner, other := k.NewNamespace(t, "ev-owner"), k.NewNamespace(t, "ev-other")
	const zone = "events.example."
	k.CreateDNSEndpoint(t, owner, "app", nil, a("app."+zone, "192.0.2.1"))
	time.Sleep(1100 * time.Millisecond)
	k.CreateDNSEndpoint(t, other, "claim", nil, a("app."+zone, "198.51.100.66"))
	k.CreateDNSEndpoint(t, other, "broken", nil, a("bad."+zone, "not-an-address"), a("good."+zone, "192.0.2.7"))

	sa := k.NewNamespace(t, "ev-dns")
	k.ServiceAccountWithRules(t, sa, "fleetdns", eventWriterRules)
	srv := startK8sCRD(t, zone, source{kubeconfig: k.TokenKubeconfig(t, sa, "fleetdns")},
		[]string{"namespaces " + owner + " " + other, "tenancy strict"}, nil, true)
	waitA(t, srv.Addr, "good."+zone, "192.0.2.7", propagationBound)
	waitA(t, srv.Addr, "app."+zone, "192.0.2.1", propagationBound)

	events := func(name string) (bool, string) {
		l, err := k.Clientset().CoreV1().Events(other).List(harness.Context(t), metav1.ListOptions{
			FieldSelector: "involvedObject.name=" + name + ",involvedObject.kind=DNSEndpoint"})
		if err != nil {
			return false, err.Error()
		}
		var msgs []string
		for _, e := range l.Items {
			msgs = append(msgs, e.Type+" "+e.Reason+": "+e.Message)
		}
		return len(msgs) > 0, strings.Join(msgs, "\n")
	}
	var claim, broken string
	testkit.Eventually(t, 10*time.Second, "an Event on the refused claim", func() (bool, string) {
		ok, s := events("claim")
		claim = s
		return ok, s
	})
	testkit.Eventually(t, 10*time.Second, "an Event on the invalid endpoint", func() (bool, string) {
		ok, s := events("broken")
		broken = s
		return ok, s
	})
	if !strings.Contains(claim, "Warning NameRefused") || !strings.Contains(claim, owner) {
		t.Errorf("the claim's Event does not say who owns the name:\n%s", claim)
	}
	if !strings.Contains(broken, "Warning InvalidEndpoint") || !strings.Contains(broken, "not-an-address") {
		t.Errorf("the broken object's Event does not name the bad target:\n%s", broken)
	}
	if f := harness.Forbidden(srv.Log()); len(f) > 0 {
		t.Errorf("create on events was not enough:\n%s", srv.Log())
	}
	// Rate-limited: the same refusal is not reported again on every change.
	k.SetDNSEndpoints(t, owner, "app", a("app."+zone, "192.0.2.1"), a("more."+zone, "192.0.2.8"))
	waitA(t, srv.Addr, "more."+zone, "192.0.2.8", propagationBound)
	time.Sleep(500 * time.Millisecond)
	if _, s := events("claim"); strings.Count(s, "\n") != strings.Count(claim, "\n") {
		t.Errorf("the same refusal was reported again:\nbefore:\n%s\nafter:\n%s", claim, s)
	}
}

// stillA asserts that name A keeps answering want for d.
func stillA(t testing.TB, addr, name, want string, d time.Duration) {
	t.Helper()
	deadline := time.Now().Add(d)
	for time.Now().Before(deadline) {
		if got := answerA(addr, name); got != want {
			t.Fatalf("%s A = %s, want it to stay %s", name, got, want)
		}
		time.Sleep(50 * time.Millisecond)
	}
}
