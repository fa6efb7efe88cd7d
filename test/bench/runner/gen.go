package main

import (
	"fmt"
	"math/rand"
	"os"
	"path/filepath"
	"strings"
)

// dataset is one set of records written in every server's format, plus the
// query files that exercise it. Every server gets exactly the same names.
type dataset struct {
	Dir     string
	Zone    string // "example.bench."
	Records int

	ManifestDir string // DNSEndpoint YAML, 100 endpoints per object
	ZoneFile    string // RFC 1035 master file (file, NSD, Knot)
	HostsFile   string // /etc/hosts format (hosts plugin: A only)

	Hits string // A queries of names that exist
	Mix  string // hits, NXDOMAIN, NODATA, CNAME chains, random names
}

const endpointsPerObject = 100

func hostName(i int) string  { return fmt.Sprintf("host-%d.example.bench.", i) }
func aliasName(i int) string { return fmt.Sprintf("alias-%d.example.bench.", i) }
func addrOf(i int) string    { return fmt.Sprintf("10.%d.%d.%d", (i>>16)&255, (i>>8)&255, i&255) }
func addr6Of(i int) string   { return fmt.Sprintf("fd00::%x:%x", i>>16, i&0xffff) }

// genDataset writes n hosts: each has an A record, every second one an
// AAAA, every tenth one a CNAME alias pointing at it.
func genDataset(dir string, n int) (*dataset, error) {
	d := &dataset{
		Dir: dir, Zone: "example.bench.", Records: n,
		ManifestDir: filepath.Join(dir, "manifests"),
		ZoneFile:    filepath.Join(dir, "db.example.bench"),
		HostsFile:   filepath.Join(dir, "hosts"),
		Hits:        filepath.Join(dir, "queries-hits.txt"),
		Mix:         filepath.Join(dir, "queries-mix.txt"),
	}
	if err := os.MkdirAll(d.ManifestDir, 0o755); err != nil {
		return nil, err
	}

	var zone, hosts strings.Builder
	zone.WriteString("$ORIGIN example.bench.\n$TTL 30\n")
	zone.WriteString("@ 30 IN SOA ns1.example.bench. hostmaster.example.bench. 1 7200 1800 86400 30\n")
	zone.WriteString("@ 30 IN NS ns1.example.bench.\nns1 30 IN A 127.0.0.1\n")

	var obj strings.Builder
	flush := func(k int) error {
		if obj.Len() == 0 {
			return nil
		}
		name := filepath.Join(d.ManifestDir, fmt.Sprintf("obj-%05d.yaml", k))
		err := os.WriteFile(name, []byte(obj.String()), 0o644)
		obj.Reset()
		return err
	}
	endpoint := func(name, typ string, targets ...string) {
		fmt.Fprintf(&obj, "  - dnsName: %s\n    recordType: %s\n    recordTTL: 30\n    targets:\n", strings.TrimSuffix(name, "."), typ)
		for _, t := range targets {
			fmt.Fprintf(&obj, "      - %q\n", t)
		}
	}
	count := 0
	for i := 0; i < n; i++ {
		if count%endpointsPerObject == 0 {
			if err := flush(count / endpointsPerObject); err != nil {
				return nil, err
			}
			fmt.Fprintf(&obj, "apiVersion: externaldns.k8s.io/v1alpha1\nkind: DNSEndpoint\nmetadata:\n  name: bench-%05d\n  namespace: default\nspec:\n  endpoints:\n", count/endpointsPerObject)
		}
		h := hostName(i)
		endpoint(h, "A", addrOf(i))
		fmt.Fprintf(&zone, "%s 30 IN A %s\n", h, addrOf(i))
		fmt.Fprintf(&hosts, "%s %s\n", addrOf(i), strings.TrimSuffix(h, "."))
		count++
		if i%2 == 0 {
			endpoint(h, "AAAA", addr6Of(i))
			fmt.Fprintf(&zone, "%s 30 IN AAAA %s\n", h, addr6Of(i))
			count++
		}
		if i%10 == 0 {
			endpoint(aliasName(i), "CNAME", strings.TrimSuffix(h, "."))
			fmt.Fprintf(&zone, "%s 30 IN CNAME %s\n", aliasName(i), h)
			count++
		}
	}
	if err := flush(count/endpointsPerObject + 1); err != nil {
		return nil, err
	}
	if err := os.WriteFile(d.ZoneFile, []byte(zone.String()), 0o644); err != nil {
		return nil, err
	}
	if err := os.WriteFile(d.HostsFile, []byte(hosts.String()), 0o644); err != nil {
		return nil, err
	}

	// The same pseudo-random sequence every run, so A and B see the same queries.
	rng := rand.New(rand.NewSource(1))
	const lines = 200000
	var hits, mix strings.Builder
	for q := 0; q < lines; q++ {
		i := rng.Intn(n)
		fmt.Fprintf(&hits, "%s A\n", hostName(i))
		switch r := rng.Intn(100); {
		case r < 60: // hit
			fmt.Fprintf(&mix, "%s A\n", hostName(i))
		case r < 70: // NODATA: odd hosts have no AAAA
			fmt.Fprintf(&mix, "%s AAAA\n", hostName(i|1))
		case r < 80: // CNAME chain to an in-zone A
			fmt.Fprintf(&mix, "%s A\n", aliasName(i-i%10))
		case r < 90: // NXDOMAIN of a plausible name
			fmt.Fprintf(&mix, "missing-%d.example.bench. A\n", i)
		default: // random names, as a cache-busting client sends
			fmt.Fprintf(&mix, "%08x.example.bench. A\n", rng.Uint32())
		}
	}
	if err := os.WriteFile(d.Hits, []byte(hits.String()), 0o644); err != nil {
		return nil, err
	}
	return d, os.WriteFile(d.Mix, []byte(mix.String()), 0o644)
}
