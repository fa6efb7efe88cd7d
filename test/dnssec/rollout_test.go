package dnssec_test

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/fleetdns/fleetdns/internal/testkit"
	"github.com/fleetdns/fleetdns/test/harness"
	"github.com/miekg/dns"
)

// service is dnsdist standing in for the GSLB Service's data path
// (kube-proxy or the load balancer): it sends each query to one of the
// ready replicas (round robin) and is told, by its console, when an
// endpoint is added (the new pod ready) or removed (the old pod
// terminating), as the endpoints controller tells kube-proxy.
type service struct {
	addr, conf, bin string
	*harness.Process
}

func startService(t *testing.T, replicas ...string) *service {
	t.Helper()
	ip := harness.NewIP(t)
	key := make([]byte, 32)
	rand.Read(key)
	dir := t.TempDir()
	var b strings.Builder
	fmt.Fprintf(&b, "setLocal('%s:53')\ncontrolSocket('%s')\nsetKey('%s')\nsetServerPolicy(roundrobin)\n",
		ip, harness.HostPort(t, ip), base64.StdEncoding.EncodeToString(key))
	for _, r := range replicas {
		fmt.Fprintf(&b, "newServer({address='%s', name='%s'}):setUp()\n", r, r)
	}
	conf := filepath.Join(dir, "dnsdist.conf")
	if err := os.WriteFile(conf, []byte(b.String()), 0o600); err != nil {
		t.Fatal(err)
	}
	bin := harness.LookPathOwn(t, "dnsdist") // the console client too: not stopped by scripts/test-deps.sh
	s := &service{addr: ip + ":53", conf: conf, bin: bin, Process: harness.StartProcess(t, "dnsdist", bin, []string{"--supervised", "--disable-syslog", "-C", conf}, dir)}
	testkit.Eventually(t, 10*time.Second, "dnsdist answers", func() (bool, string) {
		m, err := harness.Ask(s.addr, "static.gslb.example.com.", dns.TypeA, harness.Timeout(500*time.Millisecond))
		return err == nil && m.Rcode == dns.RcodeSuccess, fmt.Sprint(m, err)
	})
	return s
}

// console runs a command in dnsdist's console.
func (s *service) console(t *testing.T, cmd string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	if out, err := harness.Run(ctx, s.bin, "-C", s.conf, "-c", "-e", cmd); err != nil {
		t.Fatalf("dnsdist -c -e %s: %v\n%s", cmd, err, out)
	}
}

func (s *service) add(t *testing.T, addr string) {
	s.console(t, fmt.Sprintf("newServer({address='%s', name='%s'}):setUp()", addr, addr))
}

func (s *service) remove(t *testing.T, addr string) {
	s.console(t, fmt.Sprintf("for _, s in ipairs(getServers()) do if s:getName() == '%s' then s:setDown() end end", addr))
}

// loop asks the service for a name from workers goroutines, each query
// after the last, until stop is closed or max queries are sent; it
// counts the queries and those with no answer (timeout, SERVFAIL or not
// the record).
// firstLost is one of the first queries lost, for the failure message.
var firstLost atomic.Value

func loop(addr string, workers, max int, stop <-chan struct{}) (sent, lost *atomic.Int64, done *sync.WaitGroup) {
	sent, lost, done = new(atomic.Int64), new(atomic.Int64), new(sync.WaitGroup)
	for range workers {
		done.Add(1)
		go func() {
			defer done.Done()
			for {
				select {
				case <-stop:
					return
				default:
				}
				if sent.Add(1) > int64(max) {
					sent.Add(-1)
					return
				}
				m, err := harness.Ask(addr, "static.gslb.example.com.", dns.TypeA, harness.NoRD, harness.Timeout(time.Second), harness.Attempts(1))
				if err != nil || m.Rcode != dns.RcodeSuccess || strings.Join(harness.Targets(m, dns.TypeA), " ") != "198.18.3.3" {
					if lost.Add(1) <= 3 {
						firstLost.Store(fmt.Sprintf("%v %v", err, m))
					}
				}
				time.Sleep(2 * time.Millisecond) // a steady loop, not a load test
			}
		}()
	}
	return sent, lost, done
}

var reLameduck = regexp.MustCompile(`health \{\s*lameduck (\S+)\s*\}`)

// rollout replaces two replicas of the GSLB Corefile corefile behind one
// service as a Deployment with maxSurge 1 and maxUnavailable 0 does,
// while a query loop runs; propagation is how long the service keeps
// sending to a terminating replica. It returns the queries sent and lost.
func rollout(t *testing.T, k *harness.Kube, corefile, parent string, propagation time.Duration) (int64, int64) {
	t.Helper()
	start := func() *cluster {
		return startCluster(t, k, corefile, "eu", harness.NewIP(t), "dnssec-rollout", parent, "")
	}
	old := []*cluster{start(), start()}
	svc := startService(t, old[0].Addr, old[1].Addr)
	stop := make(chan struct{})
	sent, lost, done := loop(svc.addr, 2, 50000, stop)
	time.Sleep(300 * time.Millisecond)
	for _, o := range old {
		n := start() // the new pod, started and ready (its readiness probe: /ready)
		svc.add(t, n.Addr)
		time.Sleep(200 * time.Millisecond)
		o.Signal(9 + 6) // SIGTERM, as the kubelet sends it when the pod is deleted
		time.Sleep(propagation)
		svc.remove(t, o.Addr) // the endpoint gone from the Service's data path
		// The Deployment controller goes on with the next replica while
		// this one is in its lameduck (a terminating pod is not counted).
	}
	for _, o := range old {
		select {
		case <-o.Exited():
		case <-time.After(30 * time.Second): // terminationGracePeriodSeconds
			o.Kill()
		}
	}
	time.Sleep(300 * time.Millisecond)
	close(stop)
	done.Wait()
	return sent.Load(), lost.Load()
}

// TestRollingUpdateLosesNoQuery: a rolling update of the GSLB tree's two
// replicas behind one Service address answers every query of a loop that
// runs through it. What is modelled, with real processes: the Deployment's
// maxSurge 1 / maxUnavailable 0 (a new replica is started and ready, its
// /ready answering, before an old one is told to stop), the kubelet's
// SIGTERM, the shipped Corefile's health lameduck, and the Service's data
// path (dnsdist, round robin over the ready replicas) that learns of the
// terminating endpoint a second after the SIGTERM (kube-proxy's sync).
// Not modelled: a cloud load balancer's own health-check drain
// (docs/dnssec.md, "Rolling"). The same rollout with the lameduck taken
// out loses the queries sent to the terminating replica in that second.
func TestRollingUpdateLosesNoQuery(t *testing.T) {
	k := harness.SharedKube(t)
	k.EnsureNamespace(t, "dnssec-rollout")
	k.Apply(t, testkit.DNSEndpoint("dnssec-rollout", "zone", nil, testkit.EP("static.gslb.example.com", "A", 300, "198.18.3.3")))
	shipped := harness.ShippedCorefile(t, "deploy/gslb/configmap.yaml", "fleetdns-gslb")
	if !reLameduck.MatchString(shipped) {
		t.Fatalf("the shipped GSLB Corefile has no health lameduck:\n%s", shipped)
	}
	// Every query reaches the replicas from dnsdist's one address, where
	// in a cluster each comes from its client's: rrl (per client network)
	// would limit the loop itself, and is taken out.
	corefile := reRRL.ReplaceAllString(shipped, "")
	parent := startParent(t, map[string]string{"eu": "127.0.0.1"})
	parentIP, _, _ := strings.Cut(parent, ":")
	const propagation = time.Second

	sent, lost := rollout(t, k, corefile, parentIP, propagation)
	t.Logf("rolling update, shipped lameduck: %d queries, %d lost", sent, lost)
	if lost != 0 || sent < 100 {
		t.Errorf("rolling update with the shipped lameduck: %d of %d queries lost, e.g. %v", lost, sent, firstLost.Load())
	}

	without := reLameduck.ReplaceAllString(corefile, "health {\n    }")
	if without == corefile {
		t.Fatalf("the shipped health block changed shape:\n%s", corefile)
	}
	sent, lost = rollout(t, k, without, parentIP, propagation)
	t.Logf("rolling update without lameduck: %d queries, %d lost", sent, lost)
	if lost == 0 {
		t.Errorf("without lameduck no query was lost (%d sent): the loop does not see the terminating replica", sent)
	}
}

var reRRL = regexp.MustCompile(`(?s)\n\s*rrl \{.*?\n\s*\}`)
