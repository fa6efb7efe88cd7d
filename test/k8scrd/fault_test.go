package k8scrd_test

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/fleetdns/fleetdns/internal/testkit"
	"github.com/fleetdns/fleetdns/test/harness"
	"github.com/miekg/dns"
)

// prober asks name A every 20 ms until stopped and records every answer
// that is not want: with the API server gone, k8scrd must keep answering
// from its last good data.
type prober struct {
	mu     sync.Mutex
	asked  int
	wrong  []string
	cancel context.CancelFunc
	done   chan struct{}
}

func probe(addr, name, want string) *prober {
	ctx, cancel := context.WithCancel(context.Background())
	p := &prober{cancel: cancel, done: make(chan struct{})}
	go func() {
		defer close(p.done)
		for ctx.Err() == nil {
			got := answerA(addr, name)
			p.mu.Lock()
			p.asked++
			if got != want && len(p.wrong) < 20 {
				p.wrong = append(p.wrong, fmt.Sprintf("%s: %s", time.Now().Format("15:04:05.000"), got))
			}
			p.mu.Unlock()
			time.Sleep(20 * time.Millisecond)
		}
	}()
	return p
}

func (p *prober) stop(t *testing.T, what string) {
	t.Helper()
	p.cancel()
	<-p.done
	if p.asked < 10 {
		t.Errorf("%s: only %d queries asked", what, p.asked)
	}
	if len(p.wrong) > 0 {
		t.Errorf("%s: %d of %d queries answered wrong, first ones: %v", what, len(p.wrong), p.asked, p.wrong)
	}
	t.Logf("%s: %d queries, all answered from the last good data", what, p.asked)
}

// TestAPIServerAndEtcdOutages stops and restarts kube-apiserver, then etcd,
// while queries keep arriving: every query is answered from the last good
// data, and changes made after each return reach DNS. A private API server,
// because it is taken down.
func TestAPIServerAndEtcdOutages(t *testing.T) {
	k := harness.StartKube(t)
	k.EnsureNamespace(t, "outage")
	k.CreateDNSEndpoint(t, "outage", "www", nil, a("www.outage.example", "192.0.2.1"))
	srv := startK8sCRD(t, "outage.example.", source{kubeconfig: k.Kubeconfig}, nil, nil, true)
	waitA(t, srv.Addr, "www.outage.example", "192.0.2.1", propagationBound)

	// kube-apiserver away for a while (longer than client-go's first
	// backoff steps), then back.
	p := probe(srv.Addr, "www.outage.example", "192.0.2.1")
	k.StopAPIServer()
	time.Sleep(5 * time.Second)
	k.StartAPIServer(t)
	p.stop(t, "kube-apiserver stopped")
	k.SetDNSEndpoints(t, "outage", "www", a("www.outage.example", "192.0.2.2"))
	k.CreateDNSEndpoint(t, "outage", "after-apiserver", nil, a("after1.outage.example", "192.0.2.11"))
	d := waitA(t, srv.Addr, "www.outage.example", "192.0.2.2", 60*time.Second)
	t.Logf("first change after the API server returned: answered after %v", d)
	waitA(t, srv.Addr, "after1.outage.example", "192.0.2.11", propagationBound)

	// A crash (SIGKILL) of kube-apiserver: no goodbye to the watchers.
	p = probe(srv.Addr, "www.outage.example", "192.0.2.2")
	k.KillAPIServer()
	time.Sleep(3 * time.Second)
	k.StartAPIServer(t)
	p.stop(t, "kube-apiserver killed")
	k.DeleteDNSEndpoint(t, "outage", "after-apiserver")
	d = waitA(t, srv.Addr, "after1.outage.example", "NXDOMAIN", 60*time.Second)
	t.Logf("first change after the API server crash: answered after %v", d)

	// etcd away: the API server is up but cannot serve; then etcd returns.
	p = probe(srv.Addr, "www.outage.example", "192.0.2.2")
	k.StopEtcd()
	time.Sleep(5 * time.Second)
	k.StartEtcd(t)
	p.stop(t, "etcd stopped")
	k.CreateDNSEndpoint(t, "outage", "after-etcd", nil, a("after2.outage.example", "192.0.2.12"))
	d = waitA(t, srv.Addr, "after2.outage.example", "192.0.2.12", 60*time.Second)
	t.Logf("first change after etcd returned: answered after %v", d)
	if !srv.Running() {
		t.Fatal("coredns exited during the outages")
	}

	// A coredns that starts while the API server is away has no data: it
	// answers SERVFAIL (never an authoritative NXDOMAIN that resolvers would
	// cache) and is not ready, until the API server returns.
	k.StopAPIServer()
	late := startK8sCRD(t, "outage.example.", source{kubeconfig: k.Kubeconfig}, nil, nil, false)
	for _, name := range []string{"www.outage.example", "absent.outage.example"} {
		r := harness.Exchange(t, late.Addr, name, dns.TypeA, harness.NoRD)
		if r.Rcode != dns.RcodeServerFailure {
			t.Errorf("before the first sync, %s A: rcode %s, want SERVFAIL", name, dns.RcodeToString[r.Rcode])
		}
	}
	if ok, _ := httpStatus(late.ReadyURL); ok {
		t.Errorf("ready before the first sync")
	}
	k.StartAPIServer(t)
	d = waitA(t, late.Addr, "www.outage.example", "192.0.2.2", 60*time.Second)
	t.Logf("coredns started while the API server was away: first answer %v after the API server returned", d)
	testkit.Eventually(t, 10*time.Second, "the late replica ready", func() (bool, string) {
		ok, status := httpStatus(late.ReadyURL)
		return ok, "ready: " + status
	})
}
