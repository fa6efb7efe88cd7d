package dnssec_test

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/fleetdns/fleetdns/test/harness"
)

// zonemasterRun checks gslb.example.com with zonemaster-cli offline: a
// local root on loopback (Knot, given with --hints) delegates the zone to
// servers (name -> address) with ds, as a parent does. It returns the
// level, module and tag of the DNSSEC module's messages at NOTICE and
// above, and the output.
func zonemasterRun(t *testing.T, servers map[string]string, ds string) ([]string, string) {
	t.Helper()
	rootIP := harness.NewIP(t)
	var root strings.Builder
	fmt.Fprintf(&root, ". 86400 IN SOA ns.root. hostmaster.root. 1 14400 3600 1209600 86400\n. 86400 IN NS ns.root.\nns.root. 86400 IN A %s\n", rootIP)
	for name, addr := range servers {
		ip, _, _ := strings.Cut(addr, ":")
		fmt.Fprintf(&root, "%s 3600 IN NS %s\n%s 3600 IN A %s\n", zone, name, name, ip)
	}
	_, rdata, _ := strings.Cut(ds, " DS ")
	fmt.Fprintf(&root, "%s 3600 IN DS %s\n", zone, strings.TrimSpace(rdata))
	harness.StartKnotAt(t, rootIP, map[string]string{".": root.String()})
	hints := filepath.Join(t.TempDir(), "hints.zone")
	if err := os.WriteFile(hints, []byte(fmt.Sprintf(". 3600000 NS ns.root.\nns.root. 3600000 A %s\n", rootIP)), 0o644); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(harness.LookPath(t, "zonemaster-cli"), "--hints", hints, "--no-ipv6", "--json", "--level", "NOTICE",
		"--test", "DNSSEC", strings.TrimSuffix(zone, "."))
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("zonemaster-cli: %v\n%s", err, out)
	}
	var msgs []struct{ Level, Module, Tag string }
	if err := json.Unmarshal(out, &msgs); err != nil {
		t.Fatalf("zonemaster-cli output: %v\n%s", err, out)
	}
	var tags []string
	for _, m := range msgs {
		tags = append(tags, m.Level+" "+m.Module+" "+m.Tag)
	}
	slices.Sort(tags)
	return slices.Compact(tags), string(out)
}

// testZonemaster: Zonemaster's DNSSEC tests, offline (a local root with
// the delegation and the DS), give the signed fleet no message at NOTICE
// or above that the Knot-signed copy of the zone does not also get; with
// another key set's DS in the root it does find errors.
func testZonemaster(t *testing.T, f *fleet, knot, knotDS string) {
	got, gotRaw := zonemasterRun(t, map[string]string{"gslb-ns-eu." + zone: f.eu.Addr, "gslb-ns-us." + zone: f.us.Addr}, f.keys.ds)
	want, wantRaw := zonemasterRun(t, map[string]string{"gslb-ns-eu." + zone: knot, "gslb-ns-us." + zone: knot}, knotDS)
	for _, tag := range got {
		if !slices.Contains(want, tag) {
			t.Errorf("Zonemaster on the signed fleet: %s, which the Knot-signed copy does not get", tag)
		}
	}
	// The control: the fleet delegated with another key set's DS.
	if bad, _ := zonemasterRun(t, map[string]string{"gslb-ns-eu." + zone: f.eu.Addr}, knotDS); len(bad) == 0 {
		t.Error("Zonemaster finds nothing in the fleet delegated with a DS of another key set: it does not judge DNSSEC here")
	} else {
		t.Logf("Zonemaster with a wrong DS (control): %v", bad)
	}
	if t.Failed() {
		t.Logf("Zonemaster on the fleet:\n%s\nZonemaster on Knot:\n%s", gotRaw, wantRaw)
	} else {
		t.Logf("Zonemaster DNSSEC messages (NOTICE and above): fleet %v, Knot-signed copy %v", got, want)
	}
}
