package k8scrd_test

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/fleetdns/fleetdns/internal/testkit"
	"github.com/fleetdns/fleetdns/test/harness"
	"github.com/miekg/dns"
)

// TestEmbeddedDefaultServesIngressHealth runs README's first command,
// Corefile.example on a copy of examples/, and asks what README's tour asks:
// a DNSEndpoint host, and the Ingress host whose EndpointSlice decides what
// localtargets- answers. Marking the slice's endpoint unready in the file
// withdraws the target from localtargets- (NODATA) while the zone's own
// answer keeps the Ingress's status address; ready again, it is back.
func TestEmbeddedDefaultServesIngressHealth(t *testing.T) {
	root := harness.ModuleRoot(t)
	raw, err := os.ReadFile(filepath.Join(root, "Corefile.example"))
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	files, err := filepath.Glob(filepath.Join(root, "examples", "*"))
	if err != nil || len(files) == 0 {
		t.Fatalf("examples/: %v %v", files, err)
	}
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, filepath.Base(f)), b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	ip := harness.NewIP(t)
	port := harness.FreePort(t, ip)
	corefile := string(raw)
	for old, repl := range map[string]string{
		":1053":              ":" + strconv.Itoa(port),
		"bind 127.0.0.1":     "bind " + ip,
		"directory examples": "directory " + dir,
		"127.0.0.1:8181":     harness.HostPort(t, ip),
		"127.0.0.1:8080":     harness.HostPort(t, ip),
		"127.0.0.1:9153":     harness.HostPort(t, ip),
	} {
		if !strings.Contains(corefile, old) {
			t.Fatalf("Corefile.example no longer holds %q: update this test", old)
		}
		corefile = strings.ReplaceAll(corefile, old, repl)
	}
	c := harness.StartCoreDNS(t, corefile, harness.WithDNSAddr(ip+":"+strconv.Itoa(port)), harness.WithProbe("www.example.org.", dns.TypeA))

	if got := harness.Targets(harness.Exchange(t, c.Addr, "www.example.org.", dns.TypeA), dns.TypeA); strings.Join(got, " ") != "192.0.2.10 192.0.2.11" {
		t.Errorf("www.example.org A = %v, want README's 192.0.2.10 192.0.2.11", got)
	}
	shop := func(name string) string {
		m := harness.Exchange(t, c.Addr, name, dns.TypeA)
		if m.Rcode != dns.RcodeSuccess || !m.Authoritative {
			return "rcode " + dns.RcodeToString[m.Rcode]
		}
		return strings.Join(harness.Targets(m, dns.TypeA), " ")
	}
	if got := shop("shop.example.org."); got != "192.0.2.30" {
		t.Fatalf("shop.example.org A = %q, want the Ingress's status address 192.0.2.30\n%s", got, c.Log())
	}
	if got := shop("localtargets-shop.example.org."); got != "192.0.2.30" {
		t.Errorf("localtargets-shop.example.org A = %q, want 192.0.2.30 while the slice is ready", got)
	}

	slice := filepath.Join(dir, "shop.yaml")
	edit := func(from, to string) {
		t.Helper()
		b, err := os.ReadFile(slice)
		if err != nil {
			t.Fatal(err)
		}
		if !strings.Contains(string(b), from) {
			t.Fatalf("examples/shop.yaml no longer holds %q: update this test", from)
		}
		if err := os.WriteFile(slice, []byte(strings.Replace(string(b), from, to, 1)), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	edit("conditions: {ready: true,", "conditions: {ready: false,")
	testkit.Eventually(t, 5*time.Second, "localtargets-shop.example.org NODATA after the endpoint went unready", func() (bool, string) {
		got := shop("localtargets-shop.example.org.")
		return got == "", got
	})
	if got := shop("shop.example.org."); got != "192.0.2.30" {
		t.Errorf("shop.example.org A = %q while unready, want the status address kept (health withdraws from localtargets- only)", got)
	}
	edit("conditions: {ready: false,", "conditions: {ready: true,")
	testkit.Eventually(t, 5*time.Second, "localtargets-shop.example.org 192.0.2.30 once the endpoint is ready again", func() (bool, string) {
		got := shop("localtargets-shop.example.org.")
		return got == "192.0.2.30", got
	})
}
