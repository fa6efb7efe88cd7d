package dnssec_test

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/fleetdns/fleetdns/test/harness"
	"github.com/miekg/dns"
)

// dnsvizErrors probes zone at servers (name=address) as an analyst would
// (dnsviz probe -A, the delegation and the DS given, as a parent would
// give them), asks for names, and returns the codes of the errors that
// dnsviz grok finds with the DS as trust anchor, and its output.
func dnsvizErrors(t *testing.T, servers map[string]string, ds string, names ...string) ([]string, string) {
	t.Helper()
	bin := harness.LookPath(t, "dnsviz")
	dir := t.TempDir()
	var srv []string
	for name, addr := range servers {
		ip, _, _ := strings.Cut(addr, ":")
		srv = append(srv, name+"="+ip)
	}
	sort.Strings(srv)
	z := strings.TrimSuffix(zone, ".")
	_, dsData, _ := strings.Cut(ds, " DS ")
	probe := filepath.Join(dir, "probe.json")
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	args := []string{"probe", "-A", "-a", z, "-x", z + ":" + strings.Join(srv, ","), "-N", z + ":" + strings.Join(srv, ","),
		"-D", z + ":" + strings.TrimSpace(dsData), "-o", probe, z}
	if out, err := harness.Run(ctx, bin, append(args, names...)...); err != nil {
		t.Fatalf("dnsviz probe: %v\n%s", err, out)
	}
	anchors := filepath.Join(dir, "anchors")
	if err := os.WriteFile(anchors, []byte(ds+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	out, err := harness.Run(ctx, bin, "grok", "-P", "-l", "warning", "-r", probe, "-t", anchors)
	if err != nil {
		t.Fatalf("dnsviz grok: %v\n%s", err, out)
	}
	var doc any
	if strings.TrimSpace(out) == "" {
		return nil, "(nothing at level warning or above)"
	}
	if err := json.Unmarshal([]byte(out), &doc); err != nil {
		t.Fatalf("dnsviz grok output: %v\n%s", err, out)
	}
	var codes []string
	var walk func(v any, key string)
	walk = func(v any, key string) {
		switch x := v.(type) {
		case map[string]any:
			if c, ok := x["code"].(string); ok && (key == "errors" || key == "warnings") {
				codes = append(codes, strings.TrimSuffix(key, "s")+" "+c)
			}
			for k, e := range x {
				walk(e, k)
			}
		case []any:
			for _, e := range x {
				walk(e, key)
			}
		}
	}
	walk(doc, "")
	slices.Sort(codes)
	return slices.Compact(codes), out
}

// testJudges: DNSViz, given the delegation and the DS as the parent
// would give them, finds no DNSSEC error or warning in the signed fleet
// that it does not also find in a Knot-signed copy of the same zone, over
// the same names (the apex, a failover answer, NXDOMAIN, NODATA, a
// localtargets- name, a name below the insecure delegation); given
// another key set's DS, it does find errors. Then Zonemaster's DNSSEC
// tests on both (testZonemaster).
func testJudges(t *testing.T, f *fleet) {
	childIP, _, _ := strings.Cut(f.child, ":")
	var zf strings.Builder
	zf.WriteString("$TTL 300\n@ IN SOA gslb-ns-eu hostmaster.example.com. 1 7200 1800 86400 30\n")
	kip := harness.NewIP(t) // Knot's own name server address
	for _, e := range fleetObjects("eu", kip, kip, childIP, "198.18.1.1") {
		for _, tg := range e.Targets {
			v := tg
			if e.RecordType == "NS" {
				v = dns.Fqdn(tg)
			}
			fmt.Fprintf(&zf, "%s. IN %s %s\n", e.DNSName, e.RecordType, v)
		}
	}
	zf.WriteString("localtargets-app.gslb.example.com. IN A 198.18.1.1\n")
	signed := harness.StartKnotWith(t, kip, map[string]string{zone: zf.String()}, harness.KnotConfig{Signing: harness.KnotECDSA})
	knot, knotDS := signed.Addr, signed.DS[zone]
	names := []string{"app." + zone, "nope." + zone, "static." + zone, "localtargets-app." + zone, "www.child." + zone}

	got, gotRaw := dnsvizErrors(t, map[string]string{"gslb-ns-eu." + zone: f.eu.Addr, "gslb-ns-us." + zone: f.us.Addr}, f.keys.ds, names...)
	want, wantRaw := dnsvizErrors(t, map[string]string{"gslb-ns-eu." + zone: knot, "gslb-ns-us." + zone: knot}, knotDS, names...)
	for _, c := range got {
		if !slices.Contains(want, c) {
			t.Errorf("DNSViz on the signed fleet: %s, which the Knot-signed copy does not get", c)
		}
	}
	// The judge sees DNSSEC at all: the fleet with another zone's DS as
	// its anchor is an error.
	if bad, _ := dnsvizErrors(t, map[string]string{"gslb-ns-eu." + zone: f.eu.Addr}, knotDS, "app."+zone); len(bad) == 0 {
		t.Error("DNSViz finds no error in the fleet with a DS of another key set: it does not judge DNSSEC here")
	} else {
		t.Logf("DNSViz with a wrong DS (control): %v", bad)
	}
	if t.Failed() {
		t.Logf("DNSViz on the fleet:\n%s\nDNSViz on Knot:\n%s", harness.TailLines(gotRaw, 200), harness.TailLines(wantRaw, 80))
	} else {
		t.Logf("DNSViz errors and warnings: fleet %v, Knot-signed copy %v", got, want)
	}
	t.Run("Zonemaster", func(t *testing.T) { testZonemaster(t, f, knot, knotDS) })
}
