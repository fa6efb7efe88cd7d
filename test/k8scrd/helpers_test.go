package k8scrd_test

import (
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/fleetdns/fleetdns/internal/testkit"
	"github.com/fleetdns/fleetdns/test/harness"
	"github.com/miekg/dns"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

// server is one coredns process with a k8scrd stanza.
type server struct {
	*harness.CoreDNS
	ReadyURL   string
	MetricsURL string
}

// source says where k8scrd reads DNSEndpoints from: a kubeconfig or a
// directory of manifests. Exactly one is set.
type source struct {
	kubeconfig string
	directory  string
}

func (s source) line() string {
	if s.directory != "" {
		return "directory " + s.directory
	}
	return "kubeconfig " + s.kubeconfig
}

// startK8sCRD starts coredns serving zones from k8scrd with the given extra
// stanza lines (ttl, namespaces, labels, ...), plus `ready` and `prometheus`,
// and `more` server-block lines (e.g. "transfer { to * }"). With wait it waits
// for `ready` (k8scrd's first sync); otherwise only for the DNS socket.
func startK8sCRD(t testing.TB, zones string, src source, stanza []string, more []string, wait bool, opts ...harness.Option) *server {
	t.Helper()
	ip := harness.NewIP(t)
	ready := harness.HostPort(t, ip)
	metrics := harness.HostPort(t, ip)
	corefile := fmt.Sprintf(`%s {
    bind %s
    k8scrd {
        %s
        %s
    }
    ready %s
    prometheus %s
    %s
}
`, zones, ip, src.line(), strings.Join(stanza, "\n        "), ready, metrics, strings.Join(more, "\n    "))
	s := &server{ReadyURL: "http://" + ready + "/ready", MetricsURL: "http://" + metrics + "/metrics"}
	if wait {
		opts = append(opts, harness.WithReadyURL(s.ReadyURL))
	}
	s.CoreDNS = harness.StartCoreDNS(t, corefile, opts...)
	return s
}

// writeManifests writes objects as one multi-document YAML file per object
// group into dir.
func writeManifests(t testing.TB, dir, file string, objs ...*unstructured.Unstructured) {
	t.Helper()
	var b strings.Builder
	for _, o := range objs {
		j, err := o.MarshalJSON()
		if err != nil {
			t.Fatal(err)
		}
		b.WriteString("---\n")
		b.Write(j)
		b.WriteString("\n")
	}
	if err := os.WriteFile(filepath.Join(dir, file), []byte(b.String()), 0o644); err != nil {
		t.Fatal(err)
	}
}

// a is shorthand for an A endpoint.
func a(name string, ips ...string) harness.Endpoint {
	return harness.Endpoint{DNSName: name, RecordType: "A", Targets: ips}
}

// answerA asks addr for name A and returns the addresses, "NXDOMAIN"-style
// rcode strings for negative answers, or the error.
func answerA(addr, name string) string {
	r, err := harness.Ask(addr, name, dns.TypeA, harness.NoRD, harness.Timeout(500*time.Millisecond), harness.Attempts(1))
	if err != nil {
		return "error: " + err.Error()
	}
	if r.Rcode != dns.RcodeSuccess {
		return dns.RcodeToString[r.Rcode]
	}
	got := harness.Targets(r, dns.TypeA)
	if len(got) == 0 {
		return "NODATA"
	}
	return strings.Join(got, ",")
}

// waitA waits until name A answers want (see answerA) and returns how long it took.
func waitA(t testing.TB, addr, name, want string, timeout time.Duration) time.Duration {
	t.Helper()
	start := time.Now()
	testkit.Eventually(t, timeout, "the new A answer", func() (bool, string) {
		got := answerA(addr, name)
		return got == want, fmt.Sprintf("%s A = %s, want %s", name, got, want)
	})
	return time.Since(start)
}

// httpStatus reports whether url answers 200, and the status line.
func httpStatus(url string) (bool, string) {
	cl := http.Client{Timeout: 2 * time.Second}
	resp, err := cl.Get(url)
	if err != nil {
		return false, err.Error()
	}
	defer resp.Body.Close()
	io.Copy(io.Discard, resp.Body)
	return resp.StatusCode == http.StatusOK, resp.Status
}
