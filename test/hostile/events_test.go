package hostile_test

import (
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/fleetdns/fleetdns/internal/testkit"
	"github.com/fleetdns/fleetdns/test/harness"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// TestHostileRefusalsMakeABoundedEventStream is issue 24's finding 10: a
// tenant's 2,000 objects are refused at 10 names each (no tenant grant
// covers them). The Events written in the tenant's namespace stay within
// the namespace's share: at most 50 at once and one per 10 s after (the
// bound below allows 50 plus one per 10 s of the test, plus 5), where
// every refusal was written, and the de-duplication cleared itself past
// 16,384 messages to write them all again. Another team's refused object
// still gets its Event.
func TestHostileRefusalsMakeABoundedEventStream(t *testing.T) {
	k := harness.SharedKube(t)
	noisy := k.NewNamespace(t, "noisy")
	victim := k.NewNamespace(t, "victim")
	ip := harness.NewIP(t)
	ready := harness.HostPort(t, ip)
	harness.StartCoreDNS(t, fmt.Sprintf(`example.org {
    bind %s
    ready %s
    k8scrd {
        kubeconfig %s
        namespaces %s %s
        tenancy strict
        tenant granted example.org
    }
}
`, ip, ready, k.Kubeconfig, noisy, victim), harness.WithReadyURL("http://"+ready+"/ready"), harness.WithStartTimeout(time.Minute))

	start := time.Now()
	const objects, names = 2000, 10
	work := make(chan int)
	var wg sync.WaitGroup
	for range 8 {
		wg.Go(func() {
			for i := range work {
				var eps []harness.Endpoint
				for n := range names {
					eps = append(eps, harness.Endpoint{DNSName: fmt.Sprintf("h%d-%d.example.org", i, n), RecordType: "A", Targets: []string{"198.18.0.1"}})
				}
				if _, err := k.TryCreate(harness.Context(t), harness.DNSEndpointObject(noisy, fmt.Sprintf("o%04d", i), nil, eps...)); err != nil {
					t.Errorf("create: %v", err)
				}
			}
		})
	}
	for i := range objects {
		work <- i
	}
	close(work)
	wg.Wait()
	k.CreateDNSEndpoint(t, victim, "web", nil, harness.Endpoint{DNSName: "web.example.org", RecordType: "A", Targets: []string{"198.18.0.2"}})

	events := func(ns string) int {
		l, err := k.Clientset().CoreV1().Events(ns).List(harness.Context(t), metav1.ListOptions{})
		if err != nil {
			t.Fatal(err)
		}
		return len(l.Items)
	}
	if _, ok := testkit.Within(30*time.Second, func() bool { return events(victim) > 0 }); !ok {
		t.Errorf("finding 10: no Event on the other team's refused object within 30 s of its creation")
	}
	// Long enough for a writer without the namespace's rate to write
	// thousands (a few hundred a second).
	time.Sleep(15 * time.Second)
	got := events(noisy)
	bound := 50 + int(time.Since(start)/(10*time.Second)) + 5
	t.Logf("%d Events in the tenant's namespace %v after its %d objects were created (bound %d)", got, time.Since(start).Round(time.Second), objects, bound)
	if got > bound {
		t.Errorf("finding 10: %d Events in the tenant's namespace, want at most %d", got, bound)
	}
}
