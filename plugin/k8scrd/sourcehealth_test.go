package k8scrd

import (
	"fmt"
	"net/netip"
	"slices"
	"strings"
	"testing"
	"time"
	"unsafe"

	"github.com/fleetdns/fleetdns/plugin/k8scrd/derive"
	"github.com/fleetdns/fleetdns/plugin/k8scrd/object"

	"github.com/coredns/coredns/plugin/test"
	"github.com/fleetdns/fleetdns/internal/store"
	"github.com/fleetdns/fleetdns/internal/testkit"
	"github.com/miekg/dns"
)

// derived returns the builder's object of a declared object of kind at
// hosts (name, ready pairs in any order) with addrs as its status
// addresses, made by (*declared).object as the sources make it.
func derived(t *testing.T, k *K8sCRD, kind, name string, created time.Time, addrs []string, hosts ...any) *object.Object {
	t.Helper()
	d := &derive.Declared{Kind: kind, Namespace: "shop", Name: name, UID: "uid-" + name, Created: created}
	for i := 0; i < len(hosts); i += 2 {
		d.Hosts = append(d.Hosts, derive.DeclaredHost{Name: hosts[i].(string), Ready: hosts[i+1].(bool)})
	}
	slices.SortFunc(d.Hosts, func(x, y derive.DeclaredHost) int { return strings.Compare(x.Name, y.Name) })
	for _, a := range addrs {
		d.Addrs = append(d.Addrs, netip.MustParseAddr(a))
	}
	slices.SortFunc(d.Addrs, netip.Addr.Compare)
	o, bad := d.Object(nil, k.cfg.Zones, k.cfg.ttl)
	if len(bad) > 0 {
		t.Fatalf("%s %s: %v", kind, name, bad)
	}
	return o
}

// hostState waits until the store's host at name holds all (A and AAAA,
// as text) and ready of them as Ready, and returns it.
func hostState(t *testing.T, k *K8sCRD, name string, all, ready []string) *store.Host {
	t.Helper()
	var h *store.Host
	testkit.Eventually(t, 5*time.Second, name+" in the store", func() error {
		var ok bool
		h, ok = k.Store().Host(name)
		if !ok {
			return fmt.Errorf("not declared")
		}
		a, aaaa := h.Ready()
		if got := addrText(h.A, h.AAAA); !slices.Equal(got, all) {
			return fmt.Errorf("targets %v, want %v", got, all)
		}
		if got := addrText(a, aaaa); !slices.Equal(got, ready) {
			return fmt.Errorf("ready %v, want %v", got, ready)
		}
		return nil
	})
	return h
}

func addrText(a, aaaa []netip.Addr) []string {
	out := []string{}
	for _, x := range append(slices.Clone(a), aaaa...) {
		out = append(out, x.String())
	}
	return out
}

// TestSourceHealthWithdrawsOnlyFromReady: an Ingress whose backends are not
// ready contributes targets that the zone still answers but Ready leaves
// out, unless a ready object (another source or a DNSEndpoint) contributes
// the same address.
func TestSourceHealthWithdrawsOnlyFromReady(t *testing.T) {
	k, _ := newTestPlugin(t, "example.org", zoneBody, map[string]string{
		"mixed.yaml": testkit.DNSEndpoint("shop", "mixed", nil, testkit.EP("mixed.example.org", "A", 0, "192.0.2.1")),
	})
	t0 := time.Unix(1700000000, 0)
	// The Ingress is unready at shop and mixed, ready at up; the Service
	// (ready) shares 192.0.2.2 with it at shop.
	ing := derived(t, k, object.KindIngress, "web", t0, []string{"192.0.2.1", "192.0.2.2", "2001:db8::1"},
		"shop.example.org.", false, "mixed.example.org.", false, "up.example.org.", true, "down.example.org.", false)
	svc := derived(t, k, object.KindService, "lb", t0.Add(time.Second), []string{"192.0.2.2", "192.0.2.3"}, "shop.example.org.", true)
	k.builder.Upsert(ing)
	k.builder.Upsert(svc)

	hostState(t, k, "shop.example.org.", []string{"192.0.2.1", "192.0.2.2", "192.0.2.3", "2001:db8::1"}, []string{"192.0.2.2", "192.0.2.3"})
	hostState(t, k, "mixed.example.org.", []string{"192.0.2.1", "192.0.2.2", "2001:db8::1"}, []string{"192.0.2.1"})
	down := hostState(t, k, "down.example.org.", []string{"192.0.2.1", "192.0.2.2", "2001:db8::1"}, []string{})
	if !down.AddressDeclared {
		t.Error("an unready host lost its declaration")
	}
	up := hostState(t, k, "up.example.org.", []string{"192.0.2.1", "192.0.2.2", "2001:db8::1"}, []string{"192.0.2.1", "192.0.2.2", "2001:db8::1"})
	if a, aaaa := up.Ready(); up.Withdrawn != nil || unsafe.SliceData(a) != unsafe.SliceData(up.A) || unsafe.SliceData(aaaa) != unsafe.SliceData(up.AAAA) {
		t.Errorf("a ready host: Withdrawn %+v, Ready not the host's own slices", up.Withdrawn)
	}

	// The zone's own answers keep every status address.
	check(t, k, []test.Case{
		{Qname: "shop.example.org.", Qtype: dns.TypeA, Authoritative: true, Answer: []dns.RR{
			test.A("shop.example.org. 30 IN A 192.0.2.1"), test.A("shop.example.org. 30 IN A 192.0.2.2"), test.A("shop.example.org. 30 IN A 192.0.2.3")}},
		{Qname: "shop.example.org.", Qtype: dns.TypeAAAA, Authoritative: true, Answer: []dns.RR{
			test.AAAA("shop.example.org. 30 IN AAAA 2001:db8::1")}},
		{Qname: "down.example.org.", Qtype: dns.TypeA, Authoritative: true, Answer: []dns.RR{
			test.A("down.example.org. 30 IN A 192.0.2.1"), test.A("down.example.org. 30 IN A 192.0.2.2")}},
	})

	// The Ingress's backends become ready: nothing is withdrawn any more.
	k.builder.Upsert(derived(t, k, object.KindIngress, "web", t0, []string{"192.0.2.1", "192.0.2.2", "2001:db8::1"},
		"shop.example.org.", true, "mixed.example.org.", true, "up.example.org.", true, "down.example.org.", true))
	shop := hostState(t, k, "shop.example.org.", []string{"192.0.2.1", "192.0.2.2", "192.0.2.3", "2001:db8::1"}, []string{"192.0.2.1", "192.0.2.2", "192.0.2.3", "2001:db8::1"})
	if shop.Withdrawn != nil {
		t.Errorf("every contributor ready, Withdrawn %+v", shop.Withdrawn)
	}
	// And unready again, now the only object at shop: everything withdrawn.
	k.builder.Remove(svc.Key)
	k.builder.Upsert(ing)
	hostState(t, k, "shop.example.org.", []string{"192.0.2.1", "192.0.2.2", "2001:db8::1"}, []string{})
}
