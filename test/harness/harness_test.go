package harness

import (
	"fmt"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/miekg/dns"
)

const zone = `$ORIGIN example.org.
@	3600 IN SOA ns1.example.org. hostmaster.example.org. 1 7200 3600 1209600 300
	3600 IN NS ns1.example.org.
ns1	3600 IN A 192.0.2.53
www	300 IN A 192.0.2.1
`

func TestCorefileDNSAddr(t *testing.T) {
	for _, tc := range []struct{ corefile, want string }{
		{"example.org {\n bind 127.1.2.3\n}", "127.1.2.3:53"},
		{"# c\nexample.org:1053 {\n bind 127.1.2.3\n}", "127.1.2.3:1053"},
		{"dns://.:5300 example.net {\n bind 127.1.2.3 ::1\n}", "127.1.2.3:5300"},
		{"example.org {\n whoami\n}", ""},
	} {
		if got := corefileDNSAddr(tc.corefile); got != tc.want {
			t.Errorf("corefileDNSAddr(%q) = %q, want %q", tc.corefile, got, tc.want)
		}
	}
}

func TestNewIPIsUniqueAndBindable(t *testing.T) {
	seen := map[string]bool{}
	for range 20 {
		ip := NewIP(t)
		if seen[ip] {
			t.Fatalf("NewIP returned %s twice", ip)
		}
		seen[ip] = true
		if net.ParseIP(ip) == nil || !net.ParseIP(ip).IsLoopback() {
			t.Fatalf("NewIP returned %q, not a loopback address", ip)
		}
	}
}

func TestCoreDNSAnswersOverUDPTCPAndDig(t *testing.T) {
	ip := NewIP(t)
	srv := StartCoreDNS(t, fmt.Sprintf("example.org {\n  bind %s\n  file db.example.org\n  log\n}\n", ip),
		WithFile("db.example.org", zone), WithProbe("example.org", dns.TypeSOA))
	if srv.Addr != ip+":53" {
		t.Fatalf("Addr = %s, want %s:53", srv.Addr, ip)
	}
	for _, opts := range [][]QueryOption{nil, {TCP}, {EDNS(4096), DO}, {ECS("192.0.2.0/24"), NoRD}} {
		m := Exchange(t, srv.Addr, "WWW.example.org", dns.TypeA, opts...)
		if got := Targets(m, dns.TypeA); len(got) != 1 || got[0] != "192.0.2.1" {
			t.Errorf("A www.example.org = %v, want [192.0.2.1]", got)
		}
		if !m.Authoritative {
			t.Errorf("answer without AA")
		}
	}
	if got := DigShort(t, srv.Addr, "www.example.org", "A"); len(got) != 1 || got[0] != "192.0.2.1" {
		t.Errorf("dig +short = %v", got)
	}
	// The answer line itself, not a substring (192.0.2.1 is in 192.0.2.10).
	if out := Kdig(t, srv.Addr, "+tcp", "+short", "www.example.org", "A"); strings.TrimSpace(out) != "192.0.2.1" {
		t.Errorf("kdig +short = %q, want 192.0.2.1", out)
	}
	// The `log` plugin writes each query: the harness captured it.
	if !srv.WaitLog("www.example.org", 2*time.Second) {
		t.Errorf("log does not show the query:\n%s", srv.Log())
	}
}

func TestCoreDNSPauseResumeRestart(t *testing.T) {
	ip := NewIP(t)
	health := HostPort(t, ip)
	srv := StartCoreDNS(t, fmt.Sprintf("example.org {\n  bind %s\n  file db.example.org\n  health %s\n}\n", ip, health),
		WithFile("db.example.org", zone), WithReadyURL("http://"+health+"/health"))
	srv.Pause()
	if _, err := Ask(srv.Addr, "www.example.org", dns.TypeA, Timeout(300*time.Millisecond), Attempts(1)); err == nil {
		t.Errorf("a SIGSTOPped server answered")
	}
	srv.Resume()
	Exchange(t, srv.Addr, "www.example.org", dns.TypeA)
	pid := srv.Pid()
	srv.Restart()
	if srv.Pid() == pid {
		t.Errorf("Restart kept pid %d", pid)
	}
	Exchange(t, srv.Addr, "www.example.org", dns.TypeA)
	if rss, err := srv.RSS(); err != nil || rss < 1<<20 {
		t.Errorf("RSS = %d, %v", rss, err)
	}
	srv.Kill()
	if srv.Running() {
		t.Errorf("still running after Kill")
	}
}

func TestBadCorefileExits(t *testing.T) {
	ip := NewIP(t)
	srv := StartCoreDNS(t, fmt.Sprintf("example.org {\n  bind %s\n  nosuchplugin\n}\n", ip), WithoutWait())
	select {
	case <-srv.Exited():
	case <-time.After(10 * time.Second):
		t.Fatal("coredns with an unknown directive did not exit")
	}
	if !strings.Contains(srv.Log(), "nosuchplugin") {
		t.Errorf("log does not name the bad directive:\n%s", srv.Log())
	}
}

func TestNSDServesZone(t *testing.T) {
	n := StartNSD(t, map[string]string{"example.org": zone})
	m := Exchange(t, n.Addr, "www.example.org", dns.TypeA, NoRD)
	if got := Targets(m, dns.TypeA); len(got) != 1 || got[0] != "192.0.2.1" || !m.Authoritative {
		t.Fatalf("nsd www.example.org A: %v", m)
	}
}

// TestMetricsMatchLabelsExactly: a label value is matched whole (peer "us"
// is not "us-east"), samples of other names with the same prefix are not
// counted, and an absent series is told apart from a zero one.
func TestMetricsMatchLabelsExactly(t *testing.T) {
	m := ParseMetrics(`# HELP coredns_gslb_peer_state x
# TYPE coredns_gslb_peer_state gauge
coredns_gslb_peer_state{peer="us",state="up",zone="a."} 1
coredns_gslb_peer_state{peer="us-east",state="up",zone="a."} 1
coredns_gslb_peer_state{peer="ap",state="down",zone="a."} 0
coredns_gslb_peer_state_total{peer="us"} 7
coredns_odd{v="a \"quoted\", comma"} 2.5
go_goroutines 19
`)
	for _, c := range []struct {
		name   string
		labels []string
		sum    float64
		one    bool // exactly one sample
	}{
		{"coredns_gslb_peer_state", []string{"peer", "us"}, 1, true},
		{"coredns_gslb_peer_state", []string{"state", "up"}, 2, false},
		{"coredns_gslb_peer_state", []string{"peer", "ap"}, 0, true},
		{"coredns_gslb_peer_state", []string{"peer", "eu"}, 0, false},
		{"coredns_gslb_peer_state", nil, 2, false},
		{"coredns_odd", []string{"v", `a "quoted", comma`}, 2.5, true},
		{"go_goroutines", nil, 19, true},
	} {
		sum := m.Sum(c.name, c.labels...)
		v, ok := m.Value(c.name, c.labels...)
		if sum != c.sum || ok != c.one || ok && v != sum {
			t.Errorf("%s %v: sum %v, value %v %v; want sum %v, one sample %v", c.name, c.labels, sum, v, ok, c.sum, c.one)
		}
	}
	if n := m.Series("coredns_"); n != 5 {
		t.Errorf("Series(coredns_) = %d, want 5", n)
	}
}
