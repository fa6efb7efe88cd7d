package dnssec_test

import (
	"strings"
	"testing"
	"time"

	"github.com/fleetdns/fleetdns/test/harness"
	"github.com/miekg/dns"
)

// keyLine is the shipped Corefile's key line; a roll edits it.
const shippedKeys = "key file /etc/fleetdns/dnssec/ksk /etc/fleetdns/dnssec/zsk"

// restart replaces cluster c's process by one whose Corefile names keys
// (on the same address, as a new pod behind the same Service): a cluster
// reloaded with a new key set.
func (f *fleet) restart(t *testing.T, c *cluster, corefile, keys string) *cluster {
	t.Helper()
	cf := strings.Replace(corefile, shippedKeys, keys, 1)
	if cf == corefile && keys != shippedKeys {
		t.Fatalf("no %q in the Corefile", shippedKeys)
	}
	c.Kill() // not what is measured here: the rollout test has the pods' lameduck
	parentIP, _, _ := strings.Cut(f.parent, ":")
	return startCluster(t, f.k, cf, c.tag, c.ip, c.ns, parentIP, f.keys.dir)
}

// testZSKRoll rolls the ZSK as docs/dnssec.md
// says (a double-signature roll, as the dnssec plugin signs with every
// ZSK it is given): the new ZSK is added to the key set and the clusters
// are reloaded one by one; after the DNSKEY TTL (capped to 2 s in the
// validators here) the old ZSK is removed, the clusters again one by
// one. Validators that cached the DNSKEY RRset of any step (one Unbound
// a cluster and one asking both) get AD and never SERVFAIL at any step.
func testZSKRoll(t *testing.T, f *fleet) {
	const ttl = 2 // the validators' cache cap, standing in for the DNSKEY TTL
	us := []*unbound{
		startUnbound(t, f.keys.ds, []string{f.eu.Addr}, nil, ttl),
		startUnbound(t, f.keys.ds, []string{f.us.Addr}, nil, ttl),
		startUnbound(t, f.keys.ds, []string{f.eu.Addr, f.us.Addr}, nil, ttl),
	}
	check := func(step string) {
		t.Helper()
		for _, u := range us {
			validated(t, u, step, "app.gslb.example.com.", dns.TypeA, dns.RcodeSuccess, true)
			validated(t, u, step, "static.gslb.example.com.", dns.TypeA, dns.RcodeSuccess, true)
			validated(t, u, step, "nope.gslb.example.com.", dns.TypeA, dns.RcodeSuccess, true)
			validated(t, u, step, zone, dns.TypeDNSKEY, dns.RcodeSuccess, true)
		}
	}
	tags := func(c *cluster) string {
		m := harness.Exchange(t, c.Addr, zone, dns.TypeDNSKEY, harness.DO, harness.NoRD)
		var out []string
		for _, rr := range m.Answer {
			if k, ok := rr.(*dns.DNSKEY); ok {
				out = append(out, map[uint16]string{f.keys.tags["ksk"]: "ksk", f.keys.tags["zsk"]: "zsk", f.keys.tags["zsk2"]: "zsk2"}[k.KeyTag()])
			}
		}
		return strings.Join(out, " ")
	}
	check("before the roll")
	// Each query's answers stay in the validators' caches past the next step.
	time.Sleep(time.Second)

	f.keys.add(t, "zsk2", false)
	both := shippedKeys + " /etc/fleetdns/dnssec/zsk2"
	f.eu = f.restart(t, f.eu, f.euCorefile, both)
	check("new ZSK in eu only")
	f.us = f.restart(t, f.us, f.usCorefile, both)
	check("new ZSK in both clusters")
	if a, b := tags(f.eu), tags(f.us); a != "ksk zsk zsk2" && b != a {
		t.Errorf("DNSKEY RRsets with the new ZSK: eu %q, us %q", a, b)
	}
	time.Sleep((ttl + 1) * time.Second) // the DNSKEY TTL: every validator has the new key set

	only := "key file /etc/fleetdns/dnssec/ksk /etc/fleetdns/dnssec/zsk2"
	f.eu = f.restart(t, f.eu, f.euCorefile, only)
	check("old ZSK removed from eu")
	f.us = f.restart(t, f.us, f.usCorefile, only)
	check("old ZSK removed from both clusters")
	if a, b := tags(f.eu), tags(f.us); a != b || strings.Contains(a, "zsk ") || !strings.Contains(a, "zsk2") {
		t.Errorf("DNSKEY RRsets after the roll: eu %q, us %q", a, b)
	}
}
