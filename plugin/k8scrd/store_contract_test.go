package k8scrd

import (
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/miekg/dns"

	"github.com/fleetdns/fleetdns/internal/testkit"
)

// TestStoreContract: what localtargets and gslb read of the store, the
// negative SOA k8scrd's own answers carry, and a signal for every change.
func TestStoreContract(t *testing.T) {
	k, dir := newTestPlugin(t, "example.org", "ttl 45\nnegttl 20", map[string]string{
		"a.yaml": testkit.DNSEndpoint("apps", "a", nil, testkit.EP("app.example.org", "A", 0, "10.0.0.1")),
	})
	s := k.Store()

	soa := s.NegativeSOA("nothing.here.example.org.")
	if soa == nil || soa.Hdr.Name != "example.org." || soa.Hdr.Ttl != 20 {
		t.Fatalf("NegativeSOA below the apex = %v; want example.org.'s SOA with TTL min(45, 20)", soa)
	}
	if m, _ := ask(t, k, "nothing.example.org.", dns.TypeA); len(m.Ns) != 1 || m.Ns[0].String() != soa.String() {
		t.Errorf("the NXDOMAIN answer carries %v; NegativeSOA gave %v", m.Ns, soa)
	}
	if s.NegativeSOA("example.net.") != nil {
		t.Error("NegativeSOA of a name outside every zone is not nil")
	}
	if h, ok := s.Host("app.example.org."); !ok || h.TTL != 45 || h.TTLSet {
		t.Errorf("Host = %+v, %v; want the store's default TTL 45, not set by the endpoint", h, ok)
	}

	changed, cancel := s.Subscribe()
	defer cancel()
	select {
	case <-changed:
		t.Fatal("a signal before any change")
	default:
	}
	writeFile(t, dir, "b.yaml", testkit.DNSEndpoint("apps", "b", nil, testkit.EP("new.example.org", "A", 0, "10.0.0.2")))
	select {
	case <-changed:
	case <-time.After(5 * time.Second):
		t.Fatal("no signal within 5s of a change")
	}
	if _, ok := s.Host("new.example.org."); !ok {
		t.Error("signalled, but the new host is not in the store")
	}

	cancel()
	if err := os.Remove(filepath.Join(dir, "b.yaml")); err != nil {
		t.Fatal(err)
	}
	testkit.Eventually(t, 5*time.Second, "the host removed", func() bool { _, ok := s.Host("new.example.org."); return !ok })
	select {
	case <-changed:
		t.Error("a signal after cancel")
	default:
	}
}

// TestStoreHostOtherTypes: the store says which hosts hold records of other
// types than A and AAAA, for gslb's all-down CNAME (RFC 1034 §3.6.2).
func TestStoreHostOtherTypes(t *testing.T) {
	k, dir := newTestPlugin(t, "example.org", "", map[string]string{
		"a.yaml": testkit.DNSEndpoint("apps", "a", nil,
			testkit.EP("plain.example.org", "A", 0, "192.0.2.1"),
			testkit.EP("both.example.org", "AAAA", 0, "2001:db8::1"),
			testkit.EP("txt.example.org", "A", 0, "192.0.2.2"),
			testkit.EP("txt.example.org", "TXT", 0, "v=1")),
	})
	s := k.Store()
	for name, want := range map[string]bool{"plain.example.org.": false, "both.example.org.": false, "txt.example.org.": true} {
		if h, ok := s.Host(name); !ok || h.OtherTypes != want {
			t.Errorf("Host(%s) = %+v, %v; want OtherTypes %v", name, h, ok, want)
		}
	}
	// The TXT goes: the host holds addresses alone again.
	writeFile(t, dir, "a.yaml", testkit.DNSEndpoint("apps", "a", nil, testkit.EP("txt.example.org", "A", 0, "192.0.2.2")))
	testkit.Eventually(t, 5*time.Second, "OtherTypes cleared when the TXT goes", func() bool {
		h, ok := s.Host("txt.example.org.")
		return ok && !h.OtherTypes
	})
}
