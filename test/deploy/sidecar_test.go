package deploy

import (
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/fleetdns/fleetdns/test/harness"
	"github.com/miekg/dns"
)

// TestSidecarCorefileRoutesAsShipped runs the sidecar's Corefile from
// deploy/sidecar/configmap.yaml with the built binary: private zones go to
// their upstreams (the longest zone wins), everything else to the cluster
// DNS, and the ready endpoint the pod's probes use answers 200.
func TestSidecarCorefileRoutesAsShipped(t *testing.T) {
	shipped := harness.ShippedCorefile(t, "deploy/sidecar/configmap.yaml", "fleetdns-sidecar")

	// What the pod spec relies on.
	mustLines(t, shipped, "bind 127.0.0.1", "default 10.96.0.10")
	noDirective(t, shipped, "resolv", "forward")

	acme := &upstream{zone: ".", answer: "192.0.2.1", ips: []string{harness.NewIP(t), harness.NewIP(t)}}
	svc := &upstream{zone: ".", answer: "192.0.2.2", ips: []string{harness.NewIP(t)}}
	cluster := &upstream{zone: ".", answer: "192.0.2.3", ips: []string{harness.NewIP(t)}}
	startUpstreams(t, acme, svc, cluster)

	ip := harness.NewIP(t)
	healthPort, readyPort := harness.FreePort(t, ip), harness.FreePort(t, ip)
	const unreachable = "the pod network's addresses do not exist on the test machine: a real upstream on loopback stands in"
	cf := harness.Substitute(t, shipped,
		harness.Substitution{Old: "bind 127.0.0.1", New: "bind " + ip, Why: "127.0.0.1:53 is the pod's own loopback; on the shared test machine each test has its own loopback address"},
		harness.Substitution{Old: "health :8054", New: "health " + fmtAddr(ip, healthPort), Why: "a fixed port on every interface could collide with parallel tests"},
		harness.Substitution{Old: "ready :8055", New: "ready " + fmtAddr(ip, readyPort), Why: "a fixed port on every interface could collide with parallel tests"},
		harness.Substitution{Old: "10.20.0.53 10.20.0.54", New: acme.ips[0] + " " + acme.ips[1], Why: unreachable},
		harness.Substitution{Old: "10.20.1.53", New: svc.ips[0], Why: unreachable},
		harness.Substitution{Old: "10.96.0.10", New: cluster.ips[0], Why: "the kube-dns Service address: " + unreachable},
	)
	readyURL := "http://" + fmtAddr(ip, readyPort) + "/ready"
	srv := harness.StartCoreDNS(t, cf, harness.WithDNSAddr(ip+":53"), harness.WithReadyURL(readyURL))

	for _, c := range []struct {
		name, want, why string
	}{
		{"www.acme.internal.", "192.0.2.1", "route acme.internal"},
		{"ACME.Internal.", "192.0.2.1", "the zone apex, any case"},
		{"db.svc.acme.internal.", "192.0.2.2", "route svc.acme.internal is longer than acme.internal"},
		{"xsvc.acme.internal.", "192.0.2.1", "label boundary: xsvc is not svc"},
		{"kubernetes.default.svc.cluster.local.", "192.0.2.3", "the catch-all: the cluster DNS"},
		{"example.org.", "192.0.2.3", "the catch-all: the cluster DNS"},
		{"acme.internal.example.org.", "192.0.2.3", "suffix, not substring"},
	} {
		r := harness.Exchange(t, srv.Addr, c.name, dns.TypeA, harness.Timeout(5*time.Second))
		got := harness.Targets(r, dns.TypeA)
		if r.Rcode != dns.RcodeSuccess || len(got) != 1 || got[0] != c.want {
			t.Errorf("%s A: rcode %s, answer %v; want %s (%s)", c.name, dns.RcodeToString[r.Rcode], got, c.want, c.why)
		}
	}

	// The probes of deploy/sidecar/deployment.yaml.
	for _, url := range []string{readyURL, "http://" + fmtAddr(ip, healthPort) + "/health"} {
		resp, err := http.Get(url)
		if err != nil {
			t.Fatalf("probe %s: %v", url, err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			t.Errorf("probe %s: %s, want 200", url, resp.Status)
		}
	}
}

// TestSidecarRefusesThePodsResolvConfAsCatchAll shows what docs/sidecar.md
// promises: pointed at the pod's own resolv.conf (nameserver 127.0.0.1, the
// sidecar itself), the sidecar does not start and says why, instead of
// looping.
func TestSidecarRefusesThePodsResolvConfAsCatchAll(t *testing.T) {
	shipped := harness.ShippedCorefile(t, "deploy/sidecar/configmap.yaml", "fleetdns-sidecar")
	ip := harness.NewIP(t)
	dir := t.TempDir()
	podResolv := filepath.Join(dir, "resolv.conf")
	// What kubelet writes for the pod: dnsPolicy None, nameservers [127.0.0.1]
	// (the test's stand-in for the pod's loopback is ip).
	if err := os.WriteFile(podResolv, []byte("search sidecar-example.svc.cluster.local svc.cluster.local cluster.local\nnameserver "+ip+"\noptions ndots:5\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	cf := harness.Substitute(t, shipped,
		harness.Substitution{Old: "bind 127.0.0.1", New: "bind " + ip, Why: "the pod's loopback: each test has a loopback address of its own"},
		harness.Substitution{Old: "health :8054", New: "health " + fmtAddr(ip, harness.FreePort(t, ip)), Why: "fixed ports could collide with parallel tests"},
		harness.Substitution{Old: "ready :8055", New: "ready " + fmtAddr(ip, harness.FreePort(t, ip)), Why: "fixed ports could collide with parallel tests"},
		harness.Substitution{Old: "10.20.0.53 10.20.0.54", New: "192.0.2.1", Why: "unused here"},
		harness.Substitution{Old: "10.20.1.53", New: "192.0.2.2", Why: "unused here"},
		harness.Substitution{Old: "default 10.96.0.10", New: "resolv " + podResolv, Why: "the mistake under test: the catch-all read from the pod's own resolv.conf"},
	)
	srv := harness.StartCoreDNS(t, cf, harness.WithoutWait())
	select {
	case <-srv.Exited():
	case <-time.After(30 * time.Second):
		t.Fatalf("the sidecar started with itself as its catch-all upstream:\n%s", srv.Log())
	}
	log := srv.Log()
	if !strings.Contains(log, ip) || !strings.Contains(log, "splitdns") || !strings.Contains(log, "is this server itself") {
		t.Errorf("the start-up error does not name splitdns and the looping address %s:\n%s", ip, log)
	}
	t.Logf("the operator sees: %s", strings.TrimSpace(log))
}
