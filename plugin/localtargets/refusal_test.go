package localtargets

import (
	"context"
	"net/netip"
	"sync"
	"testing"
	"time"

	"github.com/fleetdns/fleetdns/internal/store/storetest"
	"github.com/fleetdns/fleetdns/internal/testkit"

	"github.com/prometheus/client_golang/prometheus/testutil"
)

// TestRefusalClasses (issue 24, finding 3): which addresses a tenant-set
// check and the stanza's own check may dial.
func TestRefusalClasses(t *testing.T) {
	hc := newHealthCheck()
	hc.allow = []netip.Prefix{netip.MustParsePrefix("10.20.0.0/16"), netip.MustParsePrefix("fc00::/7")}
	hc.deny = []netip.Prefix{netip.MustParsePrefix("10.20.30.0/24"), netip.MustParsePrefix("198.18.5.0/24")}
	tests := []struct {
		addr           string
		tenant, stanza string // the class refusing a tenant-set check, the stanza's
	}{
		{"198.18.0.10", "", ""},
		{"8.8.8.8", "", ""},
		{"10.99.0.1", classPrivate, ""},
		{"172.16.1.1", classPrivate, ""},
		{"172.32.1.1", "", ""},
		{"192.168.1.1", classPrivate, ""},
		{"100.64.0.1", classPrivate, ""},
		{"100.100.100.200", classMetadata, classMetadata},
		{"169.254.169.254", classMetadata, classMetadata},
		{"168.63.129.16", classMetadata, classMetadata},
		{"169.254.1.1", classLinkLocal, classLinkLocal},
		{"127.0.0.1", classLoopback, classLoopback},
		{"0.0.0.0", classUnspecified, classUnspecified},
		{"255.255.255.255", classMulticast, classMulticast},
		{"::", classUnspecified, classUnspecified},
		{"::1", classLoopback, classLoopback},
		{"fe80::1", classLinkLocal, classLinkLocal},
		{"ff02::1", classMulticast, classMulticast},
		{"fd00:ec2::254", classMetadata, classMetadata},
		{"fd20:ce::254", classMetadata, classMetadata},
		{"fd12::1", "", ""}, // allowed by fc00::/7
		{"fec0::1", classPrivate, ""},
		{"2001:db8::1", "", ""},
		{"::ffff:10.99.0.1", classPrivate, ""}, // IPv4-mapped
		{"::ffff:169.254.169.254", classMetadata, classMetadata},
		{"64:ff9b::a63:1", classPrivate, ""},                 // NAT64 of 10.99.0.1
		{"64:ff9b::a9fe:a9fe", classMetadata, classMetadata}, // NAT64 of 169.254.169.254
		{"64:ff9b::7f00:1", classLoopback, classLoopback},
		{"64:ff9b::808:808", "", ""},
		{"64:ff9b:1::1", classPrivate, ""},  // local-use NAT64
		{"2002:a63:1::1", classPrivate, ""}, // 6to4 of 10.99.0.1
		{"::a63:1", classPrivate, ""},       // IPv4-compatible
		{"10.20.1.1", "", ""},               // allowed
		{"10.20.30.1", classDenied, classDenied},
		{"198.18.5.5", classDenied, classDenied},
		{"64:ff9b::c612:505", classDenied, classDenied}, // NAT64 of a denied address
	}
	for _, tc := range tests {
		a := netip.MustParseAddr(tc.addr)
		if got := hc.refusal(a, true); got != tc.tenant {
			t.Errorf("tenant-set check of %s: refused %q, want %q", tc.addr, got, tc.tenant)
		}
		if got := hc.refusal(a, false); got != tc.stanza {
			t.Errorf("stanza check of %s: refused %q, want %q", tc.addr, got, tc.stanza)
		}
	}
	// A metadata address opens only when allow names it.
	hc.allow = append(hc.allow, netip.MustParsePrefix("100.64.0.0/10"))
	if got := hc.refusal(netip.MustParseAddr("100.100.100.200"), true); got != classMetadata {
		t.Errorf("100.100.100.200 under allow 100.64.0.0/10: %q, want metadata", got)
	}
	hc.allow = append(hc.allow, netip.MustParsePrefix("100.100.100.200/32"))
	if got := hc.refusal(netip.MustParseAddr("100.100.100.200"), true); got != "" {
		t.Errorf("100.100.100.200 named by allow: %q, want allowed", got)
	}
}

// TestTenantChecksOfPrivateAddressesRefused (issue 24, finding 3): a
// tenant's health/address at a private or metadata address is never
// dialled, its host is not served, counted by class; the stanza's check
// of a private target (a load balancer address) still runs; with
// tenant_address off and tenant_body off hosts that set them are refused.
func TestTenantChecksOfPrivateAddressesRefused(t *testing.T) {
	oracle := storetest.Host("oracle.example.org.", "198.18.0.10")
	oracle.Properties[propCheck] = "http 8080 /secrets"
	oracle.Properties[propExpect] = "200 password"
	oracle.Properties[propAddress] = "10.99.0.1"
	meta := storetest.Host("meta.example.org.", "198.18.0.11")
	meta.Properties[propCheck] = "http 80 /latest/meta-data/"
	meta.Properties[propAddress] = "64:ff9b::6464:64c8" // NAT64 of 100.100.100.200
	scan := storetest.Host("scan.example.org.", "10.99.0.2")
	scan.Properties[propCheck] = "tcp 22"
	lb := storetest.Host("lb.example.org.", "10.0.0.1")            // the stanza's check: dialled
	public := storetest.Host("public.example.org.", "198.18.0.12") // a tenant check of a public address
	public.Properties[propCheck] = "tcp 443"
	body := storetest.Host("body.example.org.", "198.18.0.13")
	body.Properties[propExpect] = "200 ok"
	s := storetest.New(oracle, meta, scan, lb, public, body)

	run := func(hc healthCheck) (*checker, map[netip.Addr]int) {
		hc.interval, hc.timeout = 50*time.Millisecond, 50*time.Millisecond
		c := newChecker(hc, []string{"example.org."}, defaultPrefix, s)
		var mu sync.Mutex
		dialled := map[netip.Addr]int{}
		c.probe = func(ctx context.Context, p probeSpec) error {
			if p.refusedBy(&c.hc) == "" {
				mu.Lock()
				dialled[p.addr]++
				mu.Unlock()
			}
			return nil
		}
		c.start()
		t.Cleanup(c.stop)
		testkit.Eventually(t, 5*time.Second, "ready", c.ready.Load)
		time.Sleep(150 * time.Millisecond)
		mu.Lock()
		defer mu.Unlock()
		return c, dialled
	}

	private0 := testutil.ToFloat64(refusedTargets.WithLabelValues(classPrivate))
	c, dialled := run(tcpHealthCheck(80))
	for _, a := range []string{"10.99.0.1", "10.99.0.2", "64:ff9b::6464:64c8", "100.100.100.200"} {
		if n := dialled[netip.MustParseAddr(a)]; n != 0 {
			t.Errorf("%s dialled %d times", a, n)
		}
	}
	for _, a := range []string{"10.0.0.1", "198.18.0.12", "198.18.0.13"} {
		if dialled[netip.MustParseAddr(a)] == 0 {
			t.Errorf("%s never checked", a)
		}
	}
	for _, h := range []string{"oracle", "meta", "scan"} {
		host, _ := s.Host(h + ".example.org.")
		if up := c.healthy(host, host.A); len(up) != 0 {
			t.Errorf("%s served %v, want nothing", h, up)
		}
	}
	if d := testutil.ToFloat64(refusedTargets.WithLabelValues(classPrivate)) - private0; d != 2 {
		t.Errorf("refused_targets{private} grew by %v, want 2 (oracle, scan)", d)
	}
	if got := testutil.ToFloat64(refusedTargets.WithLabelValues(classMetadata)); got < 1 {
		t.Errorf("refused_targets{metadata} %v, want at least 1", got)
	}
	c.stop()

	hc := tcpHealthCheck(80)
	hc.tenantAddress, hc.tenantBody = false, false
	hc.allow = append(hc.allow, netip.MustParsePrefix("10.0.0.0/8"))
	addr0, body0 := testutil.ToFloat64(refusedTargets.WithLabelValues(classTenantAddress)), testutil.ToFloat64(refusedTargets.WithLabelValues(classTenantBody))
	c, dialled = run(hc)
	if n := dialled[netip.MustParseAddr("10.99.0.1")] + dialled[netip.MustParseAddr("198.18.0.13")]; n != 0 {
		t.Errorf("tenant_address off / tenant_body off: %d checks ran", n)
	}
	if dialled[netip.MustParseAddr("10.99.0.2")] == 0 {
		t.Error("allow 10.0.0.0/8: the tenant's tcp check of 10.99.0.2 never ran")
	}
	if d := testutil.ToFloat64(refusedTargets.WithLabelValues(classTenantAddress)) - addr0; d != 1 {
		t.Errorf("refused_targets{tenant_address} grew by %v, want 1 (meta; oracle's body is refused first)", d)
	}
	if d := testutil.ToFloat64(refusedTargets.WithLabelValues(classTenantBody)) - body0; d != 2 {
		t.Errorf("refused_targets{tenant_body} grew by %v, want 2 (oracle, body)", d)
	}
	host, _ := s.Host("body.example.org.")
	if up := c.healthy(host, host.A); len(up) != 0 {
		t.Errorf("body matching refused: served %v", up)
	}
}
