package k8scrd_test

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/fleetdns/fleetdns/test/harness"
	"github.com/miekg/dns"
)

// zmEndpoints is the data Zonemaster checks, for a zone named origin whose
// two name servers are at ip1 and ip2.
func zmEndpoints(origin, ip1, ip2 string) []harness.Endpoint {
	o := strings.TrimSuffix(origin, ".")
	return []harness.Endpoint{
		{DNSName: o, RecordType: "NS", Targets: []string{"ns1." + origin, "ns2." + origin}, TTL: 3600},
		{DNSName: "ns1." + o, RecordType: "A", Targets: []string{ip1}, TTL: 3600},
		{DNSName: "ns2." + o, RecordType: "A", Targets: []string{ip2}, TTL: 3600},
		{DNSName: o, RecordType: "MX", Targets: []string{"10 mail." + origin}, TTL: 3600},
		{DNSName: "mail." + o, RecordType: "A", Targets: []string{"192.0.2.25"}, TTL: 3600},
		{DNSName: "www." + o, RecordType: "A", Targets: []string{"192.0.2.80"}, TTL: 3600},
		{DNSName: o, RecordType: "TXT", Targets: []string{"v=spf1 -all"}, TTL: 3600},
	}
}

// zmZoneFile is zmEndpoints as a zone file with k8scrd's SOA.
func zmZoneFile(origin, ip1, ip2 string) string {
	var b strings.Builder
	fmt.Fprintf(&b, "%s 3600 IN SOA ns1.%s hostmaster.%s 1 14400 3600 1209600 300\n", origin, origin, origin)
	for _, e := range zmEndpoints(origin, ip1, ip2) {
		for _, tg := range e.Targets {
			if e.RecordType == "TXT" {
				tg = `"` + tg + `"`
			}
			fmt.Fprintf(&b, "%s. %d IN %s %s\n", strings.TrimSuffix(e.DNSName, "."), e.TTL, e.RecordType, tg)
		}
	}
	return b.String()
}

// zonemaster runs zonemaster-cli on domain with the root hints file and
// returns the level, module and tag of its messages at NOTICE and above.
func zonemaster(t *testing.T, hints, domain string) (tags []string, raw string) {
	t.Helper()
	bin := harness.LookPath(t, "zonemaster-cli")
	cmd := exec.Command(bin, "--hints", hints, "--no-ipv6", "--json", "--level", "NOTICE", domain)
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("zonemaster-cli %s: %v\n%s", domain, err, out)
	}
	var msgs []struct{ Level, Module, Tag string }
	if err := json.Unmarshal(out, &msgs); err != nil {
		t.Fatalf("zonemaster-cli %s output: %v\n%s", domain, err, out)
	}
	for _, m := range msgs {
		tags = append(tags, m.Level+" "+m.Module+" "+m.Tag)
	}
	slices.Sort(tags)
	return slices.Compact(tags), string(out)
}

// TestZonemasterTwoReplicasAsKnot: two k8scrd replicas on the same API
// data, started seconds apart, checked by Zonemaster offline (a local root
// served by Knot on loopback, given with --hints), get no message that the
// same zone served by two Knot servers does not also get:
// MULTIPLE_SOA_SERIALS and Z01_MNAME_NOT_MASTER in particular.
func TestZonemasterTwoReplicasAsKnot(t *testing.T) {
	if testing.Short() {
		t.Skip("Zonemaster takes a while")
	}
	harness.LookPath(t, "zonemaster-cli")
	k8sZone, knotZone := "zmk8s.", "zmknot."
	ip1, ip2, ipK1, ipK2, ipRoot := harness.NewIP(t), harness.NewIP(t), harness.NewIP(t), harness.NewIP(t), harness.NewIP(t)

	// The local root delegates both zones.
	root := fmt.Sprintf(`. 86400 IN SOA ns.root. hostmaster.root. 1 14400 3600 1209600 86400
. 86400 IN NS ns.root.
ns.root. 86400 IN A %s
%s 3600 IN NS ns1.%s
%s 3600 IN NS ns2.%s
ns1.%s 3600 IN A %s
ns2.%s 3600 IN A %s
%s 3600 IN NS ns1.%s
%s 3600 IN NS ns2.%s
ns1.%s 3600 IN A %s
ns2.%s 3600 IN A %s
`, ipRoot, k8sZone, k8sZone, k8sZone, k8sZone, k8sZone, ip1, k8sZone, ip2,
		knotZone, knotZone, knotZone, knotZone, knotZone, ipK1, knotZone, ipK2)
	harness.StartKnotAt(t, ipRoot, map[string]string{".": root})
	hints := filepath.Join(t.TempDir(), "hints.zone")
	if err := os.WriteFile(hints, []byte(fmt.Sprintf(". 3600000 NS ns.root.\nns.root. 3600000 A %s\n", ipRoot)), 0o644); err != nil {
		t.Fatal(err)
	}

	// The reference: Knot on two addresses, the same data as a zone file.
	kz := zmZoneFile(knotZone, ipK1, ipK2)
	harness.StartKnotAt(t, ipK1, map[string]string{knotZone: kz})
	harness.StartKnotAt(t, ipK2, map[string]string{knotZone: kz})

	// Two k8scrd replicas on one API server's objects, started seconds apart.
	k := harness.SharedKube(t)
	ns := k.NewNamespace(t, "zonemaster")
	k.CreateDNSEndpoint(t, ns, "zone", nil, zmEndpoints(k8sZone, ip1, ip2)...)
	replica := func(ip string) *harness.CoreDNS {
		return harness.StartCoreDNS(t, fmt.Sprintf(`%s {
    bind %s
    k8scrd {
        kubeconfig %s
        namespaces %s
        ttl 3600
        negttl 300
        soa ns1.%s hostmaster.%s 14400 3600 1209600
    }
}
`, k8sZone, ip, k.Kubeconfig, ns, k8sZone, k8sZone), harness.WithProbe(k8sZone, dns.TypeSOA))
	}
	r1 := replica(ip1)
	time.Sleep(2 * time.Second)
	r2 := replica(ip2)
	serial := func(addr string) uint32 {
		m := harness.Exchange(t, addr, k8sZone, dns.TypeSOA, harness.NoRD)
		if len(m.Answer) != 1 {
			t.Fatalf("SOA at %s: %v", addr, m)
		}
		return m.Answer[0].(*dns.SOA).Serial
	}
	if s1, s2 := serial(r1.Addr), serial(r2.Addr); s1 != s2 {
		t.Fatalf("replicas started 2 s apart publish serials %d and %d", s1, s2)
	}

	got, gotRaw := zonemaster(t, hints, strings.TrimSuffix(k8sZone, "."))
	want, wantRaw := zonemaster(t, hints, strings.TrimSuffix(knotZone, "."))
	for _, tag := range got {
		if !slices.Contains(want, tag) {
			t.Errorf("Zonemaster on k8scrd: %s, which Knot serving the same zone does not get", tag)
		}
	}
	if t.Failed() {
		t.Logf("Zonemaster on k8scrd:\n%s\nZonemaster on Knot:\n%s", gotRaw, wantRaw)
	} else {
		t.Logf("Zonemaster messages (NOTICE and above) on both: %s", strings.Join(got, "; "))
	}
}
