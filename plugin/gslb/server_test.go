package gslb

import (
	"fmt"
	"net"
	"slices"
	"testing"

	"github.com/coredns/caddy"
	"github.com/coredns/coredns/core/dnsserver"
	"github.com/coredns/coredns/plugin"
	ctest "github.com/coredns/coredns/test"
	"github.com/fleetdns/fleetdns/internal/store"

	"github.com/miekg/dns"
)

// serverStore is what the stand-in k8scrd of the in-process servers holds.
var serverStore = newFakeStore()

// fakeK8scrd stands in for k8scrd in a real CoreDNS server: it offers the
// store and answers the zone's SOA, NXDOMAIN otherwise.
type fakeK8scrd struct {
	next
	Next plugin.Handler
}

func (f *fakeK8scrd) Store() store.Store { return serverStore }

var _ store.Provider = (*fakeK8scrd)(nil)

func init() {
	if !slices.Contains(dnsserver.Directives, "k8scrd") {
		i := slices.Index(dnsserver.Directives, "file")
		dnsserver.Directives = slices.Insert(dnsserver.Directives, i, "gslb", "k8scrd")
		plugin.Register("k8scrd", func(c *caddy.Controller) error {
			for c.Next() {
			}
			dnsserver.GetConfig(c).AddPlugin(func(next plugin.Handler) plugin.Handler {
				return &fakeK8scrd{Next: next}
			})
			return nil
		})
	}
}

func startServer(t *testing.T, corefile string) string {
	t.Helper()
	i, udp, _, err := ctest.CoreDNSServerAndPorts(corefile)
	if err != nil {
		t.Fatalf("CoreDNS: %v", err)
	}
	t.Cleanup(func() { i.Stop() })
	return udp
}

func exchangeECS(t *testing.T, server, name, subnet string) []string {
	t.Helper()
	m := new(dns.Msg)
	m.SetQuestion(name, dns.TypeA)
	m.SetEdns0(1232, false)
	o := m.IsEdns0()
	o.Option = append(o.Option, &dns.EDNS0_SUBNET{Code: dns.EDNS0SUBNET, Family: 1, SourceNetmask: 24, Address: net.ParseIP(subnet)})
	r, err := dns.Exchange(m, server)
	if err != nil {
		t.Fatalf("query %s: %v", name, err)
	}
	return addrs(r)
}

// TestCacheStanzaNeverHandsGeoAnswerToAnotherRegion runs real CoreDNS
// servers with cache in front of gslb: plain cache keys answers without
// the client subnet and hands one region's answer to the other, the
// documented stanza does not.
func TestCacheStanzaNeverHandsGeoAnswerToAnotherRegion(t *testing.T) {
	us := startPeer(t, map[string][]string{app: {"10.0.2.1"}})
	serverStore.Put(host(app, "10.0.1.1"))
	block := func(cache string) string {
		return fmt.Sprintf(`%s:0 {
	bind 127.0.0.1
	%s
	gslb {
		geotag eu
		peer us %s
		strategy geoip
		geo cidr 10.1.0.0/16 eu
		geo cidr 10.2.0.0/16 us
		timeout 500ms
	}
	k8scrd
}`, zone, cache, us.addr)
	}

	srv := startServer(t, block("cache {\n disable success "+zone+"\n disable denial "+zone+"\n }"))
	if got := exchangeECS(t, srv, app, "10.2.9.0"); !slices.Equal(got, []string{"10.0.2.1"}) {
		t.Fatalf("us client: got %v, want us's target", got)
	}
	if got := exchangeECS(t, srv, app, "10.1.9.0"); !slices.Equal(got, []string{"10.0.1.1"}) {
		t.Errorf("with the documented cache stanza, an eu client got %v, want eu's target", got)
	}

	// The counter-proof that this test can see the leak: a plain cache
	// answers the eu client from the us client's cached answer.
	plain := startServer(t, block("cache"))
	exchangeECS(t, plain, app, "10.2.9.0")
	if got := exchangeECS(t, plain, app, "10.1.9.0"); !slices.Equal(got, []string{"10.0.2.1"}) {
		t.Errorf("a plain cache did not hand the us answer to the eu client (got %v): this test no longer shows why the stanza is needed", got)
	}
}
