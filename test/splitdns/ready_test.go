package splitdns

import (
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/fleetdns/fleetdns/internal/testkit"
	"github.com/fleetdns/fleetdns/test/harness"
)

// TestReadinessDoesNotWaitForPrivateRoutes: with one private upstream dead,
// the default `ready_requires` (the default route) still reports ready, so
// the replicas stay in service; `ready_requires all` opts in to waiting.
func TestReadinessDoesNotWaitForPrivateRoutes(t *testing.T) {
	w := startWorld(t)
	dead := harness.NewAddr(t)
	start := func(requires string, opts ...harness.Option) (*harness.CoreDNS, string) {
		ip := harness.NewIP(t)
		url := "http://" + ip + ":8181/ready"
		srv := harness.StartCoreDNS(t, fmt.Sprintf(`.:53 {
    bind %s
    ready %s:8181
    splitdns {
        route private.corp %s
        default %s
        health_check 100ms
        %s
    }
}`, ip, ip, dead, w.public, requires), append(opts, harness.WithReadyURL(url))...)
		return srv, url
	}
	ready := func(url string) (int, string) {
		cl := http.Client{Timeout: 5 * time.Second} // the machine may be busy
		resp, err := cl.Get(url)
		if err != nil {
			return 0, err.Error()
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, strings.TrimSpace(string(b))
	}

	// Started with WithReadyURL: StartCoreDNS waited for 200 already.
	start("")

	srv, url := start("ready_requires all", harness.WithoutWait())
	testkit.Eventually(t, 10*time.Second, "the ready endpoint up", func() (bool, string) {
		code, _ := ready(url)
		return code != 0, "ready endpoint not up"
	})
	time.Sleep(time.Second) // health checks run every 100ms: time enough to pass if they could
	code, body := ready(url)
	for i := 0; code == 0 && i < 3; i++ { // a failed GET says nothing about readiness: ask again
		time.Sleep(200 * time.Millisecond)
		code, body = ready(url)
	}
	if code == http.StatusOK || !strings.Contains(body, "splitdns") {
		t.Errorf("ready_requires all with a dead private upstream: %d %q, want 503 naming splitdns", code, body)
	}
	if got := answerA(t, srv.Addr, "www.example.com."); got != publicWWW {
		t.Errorf("not ready, but the default route should still answer: %s", got)
	}
}
