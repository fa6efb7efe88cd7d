package k8scrd

import (
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/coredns/caddy"
	"github.com/fleetdns/fleetdns/internal/testkit"
	"github.com/miekg/dns"
)

func TestSerialFromTheDirectory(t *testing.T) {
	k, dir := newTestPlugin(t, "example.org", zoneBody, nil)
	serial := func() uint32 { r, _ := ask(t, k, "example.org.", dns.TypeSOA); return r.Answer[0].(*dns.SOA).Serial }
	// The newest file time.
	at := time.Unix(1_800_000_000, 0)
	path := filepath.Join(dir, "a.yaml")
	writeAt := func(content string, mtime time.Time) {
		t.Helper()
		tmp := filepath.Join(dir, ".tmp")
		if err := os.WriteFile(tmp, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
		if err := os.Chtimes(tmp, mtime, mtime); err != nil {
			t.Fatal(err)
		}
		if err := os.Rename(tmp, path); err != nil {
			t.Fatal(err)
		}
	}
	writeAt(testkit.DNSEndpoint("ns", "a", nil, testkit.EP("a.example.org", "A", 0, "192.0.2.1")), at)
	testkit.Eventually(t, 5*time.Second, "serial is the file time", func() bool { return serial() == 1_800_000_000 })
	// A change within the same second still moves it.
	writeAt(testkit.DNSEndpoint("ns", "a", nil, testkit.EP("a.example.org", "A", 0, "192.0.2.2")), at)
	testkit.Eventually(t, 5*time.Second, "change applied", hasA(k, t, "a.example.org.", "192.0.2.2"))
	if s := serial(); s != 1_800_000_001 {
		t.Errorf("a change in the same second: serial %d, want 1800000001", s)
	}
	// An SOA at the apex in the data is the serial, as a zone file's.
	writeAt(testkit.DNSEndpoint("ns", "a", nil, testkit.EP("a.example.org", "A", 0, "192.0.2.2"),
		testkit.EP("example.org", "SOA", 0, "ns1.example.org. hostmaster.example.org. 2026120101 7200 1800 86400 10")), at.Add(time.Hour))
	testkit.Eventually(t, 5*time.Second, "serial from the data's SOA", func() bool { return serial() == 2026120101 })
	r, _ := ask(t, k, "example.org.", dns.TypeSOA)
	if soa := r.Answer[0].(*dns.SOA); soa.Ns != "ns1.example.org." || soa.Refresh != 7200 {
		t.Errorf("SOA %v: only the serial comes from the data", soa)
	}
	if r, _ := ask(t, k, "a.example.org.", dns.TypeA); len(r.Answer) != 1 {
		t.Errorf("the object's other endpoints: %v", r)
	}
}

func TestSOATimersAreSettable(t *testing.T) {
	k, _ := newTestPlugin(t, "example.org", "soa ns1.example.org hostmaster.example.org 14400 3600 1209600\nnegttl 300", nil)
	r, _ := ask(t, k, "example.org.", dns.TypeSOA)
	soa := r.Answer[0].(*dns.SOA)
	if soa.Refresh != 14400 || soa.Retry != 3600 || soa.Expire != 1209600 || soa.Minttl != 300 {
		t.Errorf("SOA %v, want refresh 14400 retry 3600 expire 1209600 minimum 300", soa)
	}
	for _, bad := range []string{
		"soa a. b. 1 2",                   // not all three
		"soa a. b. 3600 7200 1209600",     // retry above refresh
		"soa a. b. 14400 3600 7200",       // expire below refresh
		"soa a. b. 14400 3600 x",          // not a number
		"soa a. b. 0 3600 1209600",        // zero
		"soa a. b. 14400 3600 4294967295", // above 2^31-1 (RFC 2181 §8)
	} {
		c := caddy.NewTestController("dns", "k8scrd example.org {\n directory /tmp\n"+bad+"\n}")
		if _, err := parse(c); err == nil {
			t.Errorf("%q: accepted", bad)
		}
	}
}
