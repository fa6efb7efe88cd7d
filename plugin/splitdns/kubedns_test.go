package splitdns

import (
	"reflect"
	"testing"
	"time"

	"github.com/fleetdns/fleetdns/internal/testkit"
	"github.com/miekg/dns"
)

func TestKubeDNSFilesParse(t *testing.T) {
	f := kubeDNSFiles{
		stubDomains:         []byte(`{"Acme.Local": ["1.2.3.4", "1.2.3.5:5353", "not-an-ip"], "bad..zone": ["1.1.1.1"]}`),
		upstreamNameservers: []byte(`["8.8.8.8", "[2001:db8::1]:53"]`),
	}
	kd, err := f.parse()
	if err != nil {
		t.Fatal(err)
	}
	if want := []string{"1.2.3.4:53", "1.2.3.5:5353"}; !reflect.DeepEqual(kd.stubDomains["acme.local."], want) {
		t.Errorf("stubDomains acme.local. = %v, want %v", kd.stubDomains["acme.local."], want)
	}
	if want := []string{"8.8.8.8:53", "[2001:db8::1]:53"}; !reflect.DeepEqual(kd.upstreamNameservers, want) {
		t.Errorf("upstreamNameservers = %v, want %v", kd.upstreamNameservers, want)
	}

	if _, err := (kubeDNSFiles{stubDomains: []byte(`{"acme.local": [`)}).parse(); err == nil {
		t.Errorf("truncated JSON accepted")
	}
	if kd, err := (kubeDNSFiles{}).parse(); err != nil || len(kd.stubDomains) != 0 || kd.upstreamNameservers != nil {
		t.Errorf("empty files: %v %v", kd, err)
	}
}

func TestPrecedence(t *testing.T) {
	s := New()
	s.cfg.routes = []zoneRoute{{zone: "acme.local.", addrs: []string{"10.0.0.1:53"}}}
	s.cfg.resolv = []string{"10.0.0.53:53"}
	kd := kubeDNS{
		stubDomains:         map[string][]string{"acme.local.": {"10.9.9.9:53"}, "other.local.": {"10.9.9.8:53"}},
		upstreamNameservers: []string{"8.8.8.8:53"},
	}
	tbl, _ := s.build(kd)
	if got := tbl.lookup("x.acme.local.").upstreams[0].addr; got != "10.0.0.1:53" {
		t.Errorf("explicit route should win over stubDomains, got %s", got)
	}
	if got := tbl.lookup("x.other.local.").upstreams[0].addr; got != "10.9.9.8:53" {
		t.Errorf("stubDomains route: got %s", got)
	}
	if got := tbl.def; got.source != "upstreamNameservers" {
		t.Errorf("upstreamNameservers should win over resolv, got %s", got.source)
	}
	s.cfg.def = []string{"10.0.0.2:53"}
	tbl, _ = s.build(kd)
	if got := tbl.def; got.source != "default" {
		t.Errorf("default should win over upstreamNameservers, got %s", got.source)
	}
	if tbl.lookup("x.acme.local.").upstreams[0] != tbl.lookup("acme.local.").upstreams[0] {
		t.Errorf("one upstream address should be one shared upstream")
	}
}

func TestKubeDNSChangeTakesEffect(t *testing.T) {
	old := kubeDNSInterval
	kubeDNSInterval = 20 * time.Millisecond
	defer func() { kubeDNSInterval = old }()

	one := newUpstream(t, answerA("10.0.0.1"))
	two := newUpstream(t, answerA("10.0.0.2"))
	dir := t.TempDir()
	// As kubelet does: a new file renamed into place.
	write := func(name, content string) { testkit.WriteFile(t, dir, name, content) }
	write(stubDomainsFile, `{"acme.local": ["`+one.addr+`"]}`)
	s := newSplitDNS(t, `splitdns {
		kubedns `+dir+`
	}`)
	answer := func() string {
		m := query(t, s, "db.acme.local.", dns.TypeA, false)
		if len(m.Answer) == 0 {
			return dns.RcodeToString[m.Rcode]
		}
		return m.Answer[0].(*dns.A).A.String()
	}
	if got := answer(); got != "10.0.0.1" {
		t.Fatalf("before the change: %s", got)
	}
	write(stubDomainsFile, `{"acme.local": ["`+two.addr+`"]}`)
	testkit.Eventually(t, 2*time.Second, "the change to stubDomains picked up", func() (bool, string) {
		got := answer()
		return got == "10.0.0.2", "answer " + got
	})
	write(stubDomainsFile, `{"acme.local": [`) // broken: keep the last good routes
	time.Sleep(100 * time.Millisecond)
	if got := answer(); got != "10.0.0.2" {
		t.Errorf("after a malformed file: %s, want the last good route", got)
	}
	write(upstreamNameserversFile, `["`+one.addr+`"]`)
	write(stubDomainsFile, `{}`)
	testkit.Eventually(t, 2*time.Second, "stub domain removal and upstreamNameservers picked up", func() (bool, string) {
		got := answer()
		return got == "10.0.0.1", "answer " + got
	})
	if src := s.table.Load().def.source; src != "upstreamNameservers" {
		t.Errorf("default route from %s", src)
	}
}
