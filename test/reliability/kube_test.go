package reliability

import (
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/fleetdns/fleetdns/test/harness"

	"github.com/miekg/dns"
)

// test/k8scrd/fault_test.go stops the API server (SIGTERM), kills it, and
// stops etcd (SIGTERM) under a 20 ms prober. Here etcd is killed (SIGKILL),
// then both are killed at once, under a load of about a thousand queries a
// second, so that even a short SERVFAIL burst would show; changes made after
// the return must arrive.
func TestEtcdAndAPIServerKilledUnderLoad(t *testing.T) {
	if testing.Short() {
		t.Skip("a private kube-apiserver and etcd, killed")
	}
	harness.RequirePlugins(t, "k8scrd")
	k := harness.StartKube(t)
	k.EnsureNamespace(t, "reliability")
	k.CreateDNSEndpoint(t, "reliability", "www", nil, harness.Endpoint{DNSName: "www.example.org", RecordType: "A", Targets: []string{"192.0.2.1"}})
	ip := harness.NewIP(t)
	srv := harness.StartCoreDNS(t, fmt.Sprintf(`%s:53 {
    bind %s
    k8scrd {
        kubeconfig %s
    }
    errors
}
`, zone, ip, k.Kubeconfig), harness.WithProbe("www."+zone, dns.TypeA))
	harness.WaitTargets(t, 30*time.Second, "www served from the API", srv.Addr, "www."+zone, dns.TypeA, "192.0.2.1")

	var servfail atomic.Int64
	check := func(_ string, m *dns.Msg) string {
		if m.Rcode == dns.RcodeServerFailure {
			servfail.Add(1)
		}
		return wantWWW("192.0.2.1")("", m)
	}
	l := startLoad(srv.Addr, 4, 2*time.Millisecond, []string{"www." + zone}, dns.TypeA, check)
	k.Etcd.Kill()
	time.Sleep(5 * time.Second)
	k.StartEtcd(t)
	total, wrong, first := l.end()
	t.Logf("etcd killed for 5 s: %d queries, %d wrong (%d SERVFAIL), slowest %v", total, wrong, servfail.Load(), l.maxLat.Round(time.Millisecond))
	if wrong > 0 {
		t.Errorf("etcd killed: %d of %d answers not the last good data: %v", wrong, total, first)
	}
	k.SetDNSEndpoints(t, "reliability", "www", harness.Endpoint{DNSName: "www.example.org", RecordType: "A", Targets: []string{"192.0.2.2"}})
	changed := time.Now()
	harness.WaitTargets(t, 60*time.Second, "the first change after etcd returned", srv.Addr, "www."+zone, dns.TypeA, "192.0.2.2")
	t.Logf("first change after etcd returned: served after %v", time.Since(changed).Round(time.Millisecond))

	servfail.Store(0)
	check2 := func(_ string, m *dns.Msg) string {
		if m.Rcode == dns.RcodeServerFailure {
			servfail.Add(1)
		}
		return wantWWW("192.0.2.2")("", m)
	}
	l = startLoad(srv.Addr, 4, 2*time.Millisecond, []string{"www." + zone}, dns.TypeA, check2)
	k.KillAPIServer()
	k.Etcd.Kill()
	time.Sleep(5 * time.Second)
	k.StartEtcd(t)
	k.StartAPIServer(t)
	total, wrong, first = l.end()
	t.Logf("kube-apiserver and etcd killed together for 5 s (plus their start): %d queries, %d wrong (%d SERVFAIL), slowest %v", total, wrong, servfail.Load(), l.maxLat.Round(time.Millisecond))
	if wrong > 0 {
		t.Errorf("API server and etcd killed: %d of %d answers not the last good data: %v", wrong, total, first)
	}
	k.CreateDNSEndpoint(t, "reliability", "after", nil, harness.Endpoint{DNSName: "after.example.org", RecordType: "A", Targets: []string{"192.0.2.9"}})
	changed = time.Now()
	harness.WaitTargets(t, 60*time.Second, "the first object created after both returned", srv.Addr, "after."+zone, dns.TypeA, "192.0.2.9")
	t.Logf("first object created after both returned: served after %v", time.Since(changed).Round(time.Millisecond))
	if !srv.Running() {
		t.Fatalf("coredns exited: %v", srv.ExitErr())
	}
}
