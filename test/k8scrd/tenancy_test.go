package k8scrd_test

import (
	"testing"
	"time"

	"github.com/fleetdns/fleetdns/test/harness"
)

// TestTenancyStrictFirstPublisherOwnsTheName: with real creationTimestamps
// from the API server, the namespace whose object published a name first
// owns it; another namespace's endpoints for it are ignored, and take over
// when the owner's object is deleted. With `tenancy shared` the targets merge.
func TestTenancyStrictFirstPublisherOwnsTheName(t *testing.T) {
	k := harness.SharedKube(t)
	// The later namespace sorts first, so that only the timestamps can decide.
	first, second := k.NewNamespace(t, "tenancy-z"), k.NewNamespace(t, "tenancy-a")
	k.CreateDNSEndpoint(t, first, "app", nil, a("app.tenancy.example", "192.0.2.1"))
	time.Sleep(1100 * time.Millisecond) // creationTimestamp has one-second resolution
	k.CreateDNSEndpoint(t, second, "app", nil, a("app.tenancy.example", "192.0.2.66"), a("own.tenancy.example", "192.0.2.2"))

	strict := startK8sCRD(t, "tenancy.example.", source{kubeconfig: k.Kubeconfig},
		[]string{"namespaces " + first + " " + second, "tenancy strict"}, nil, true)
	shared := startK8sCRD(t, "tenancy.example.", source{kubeconfig: k.Kubeconfig},
		[]string{"namespaces " + first + " " + second}, nil, true)

	waitA(t, strict.Addr, "own.tenancy.example", "192.0.2.2", propagationBound)
	waitA(t, strict.Addr, "app.tenancy.example", "192.0.2.1", propagationBound)
	waitA(t, shared.Addr, "app.tenancy.example", "192.0.2.1,192.0.2.66", propagationBound)

	// The owner's object goes away: the next publisher owns the name now.
	k.DeleteDNSEndpoint(t, first, "app")
	waitA(t, strict.Addr, "app.tenancy.example", "192.0.2.66", propagationBound)
	waitA(t, shared.Addr, "app.tenancy.example", "192.0.2.66", propagationBound)
}
