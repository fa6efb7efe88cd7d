package delegation

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/fleetdns/fleetdns/internal/testkit"
	"github.com/fleetdns/fleetdns/test/harness"
)

// powerDNSPolicy is the Lua update policy docs/multicluster-gslb.md shows:
// a key <tag>.gslb.example.com may touch the zone's NS RRset and
// gslb-ns-<tag>.gslb.example.com's A and AAAA, nothing else.
const powerDNSPolicy = `function updatepolicy(input)
  local tag = string.match(input:getTsigName():toStringNoDot(), "^([%w_-]+)%.gslb%.example%.com$")
  if tag == nil then return false end
  local name, t = input:getQName():toStringNoDot(), input:getQType()
  if name == "gslb.example.com" then return t == pdns.NS end
  if name == "gslb-ns-" .. tag .. ".gslb.example.com" then return t == pdns.A or t == pdns.AAAA end
  return false
end
`

// TestPowerDNSParentTakesEachClustersOwnDelegation: with PowerDNS's Lua
// update policy, the clusters publish themselves and find each other, a
// key may not touch another cluster's glue (PowerDNS drops the record and
// answers NOERROR: the cluster counts not_applied), and a decommissioned
// cluster removes only its own records.
func TestPowerDNSParentTakesEachClustersOwnDelegation(t *testing.T) {
	f := newFleet(t, "eu", "us")
	ip := harness.NewIP(t)
	setup := [][]string{}
	var keys []string
	for _, tag := range []string{"eu", "us"} {
		setup = append(setup, []string{"import-tsig-key", tag + "." + zone, "hmac-sha256", f.secrets[tag]})
		keys = append(keys, tag+"."+zone)
	}
	setup = append(setup, append([]string{"set-meta", parent, "TSIG-ALLOW-DNSUPDATE"}, keys...))
	p := harness.StartPowerDNS(t, ip, map[string]string{parent: parentZoneText(ip)},
		"dnsupdate=yes\nallow-dnsupdate-from=127.0.0.0/8\nlua-dnsupdate-policy-script=policy.lua\n",
		map[string]string{"policy.lua": powerDNSPolicy}, setup...)
	f.parentAddr = p.Addr
	eu, us := f.clusters["eu"], f.clusters["us"]

	f.publish(t, "eu", "")
	f.publish(t, "us", "")
	waitDelegation(t, f.parentAddr, "eu and us published", eu, us)
	waitPeers(t, "eu and us find each other", eu, us)

	rogue := newCluster(t, "us", f.keys["eu"], 9)
	rogue.start(t, f.parentAddr, publishStanza(f.parentAddr, f.keys["eu"], rogue.ip, ""))
	testkit.Eventually(t, settle, "the rogue UPDATE dropped", func() (bool, string) {
		n := harness.Scrape(t, "http://"+rogue.metrics+"/metrics").Sum("coredns_gslb_delegation_checks_total", "result", "not_applied")
		return n > 0, fmt.Sprintf("rogue's not_applied checks: %v; log:\n%s", n, rogue.srv.Log())
	})
	time.Sleep(2 * interval)
	if n := strings.Count(rogue.srv.Log(), "does not hold it"); n != 1 {
		t.Errorf("%d log lines for the dropped UPDATEs, want one:\n%s", n, rogue.srv.Log())
	}
	rogue.srv.Stop()
	waitDelegation(t, f.parentAddr, "after the dropped UPDATE", eu, us)

	f.publish(t, "us", "            decommission\n")
	waitDelegation(t, f.parentAddr, "us decommissioned", eu)
	waitPeers(t, "us gone", eu)
	if t.Failed() {
		t.Logf("pdns_server's log:\n%s", p.Log())
	}
}
