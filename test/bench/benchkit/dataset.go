package benchkit

import (
	"fmt"
	"math/rand"
	"os"
	"path/filepath"
	"strings"

	"github.com/fleetdns/fleetdns/internal/testkit"
)

// Dataset is one set of records written in every server's format, plus the
// query files that exercise it. Every server gets exactly the same names.
// Expect says what a correct server answers to each query of the files.
type Dataset struct {
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

// HostName is the name of host i; AliasName the CNAME alias of host i
// (every tenth host has one); AddrOf and Addr6Of its A and AAAA targets.
func HostName(i int) string  { return fmt.Sprintf("host-%d.example.bench.", i) }
func AliasName(i int) string { return fmt.Sprintf("alias-%d.example.bench.", i) }
func AddrOf(i int) string    { return fmt.Sprintf("10.%d.%d.%d", (i>>16)&255, (i>>8)&255, i&255) }
func Addr6Of(i int) string   { return fmt.Sprintf("fd00::%x:%x", i>>16, i&0xffff) }

// GenDataset writes n hosts: each has an A record, every second one an
// AAAA, every tenth one a CNAME alias pointing at it.
func GenDataset(dir string, n int) (*Dataset, error) {
	d := &Dataset{
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

	// One DNSEndpoint object is open at a time; flush writes it to file k.
	var objName string
	var eps []testkit.Endpoint
	flush := func(k int) error {
		if objName == "" {
			return nil
		}
		name := filepath.Join(d.ManifestDir, fmt.Sprintf("obj-%05d.yaml", k))
		err := os.WriteFile(name, []byte(testkit.DNSEndpoint("default", objName, nil, eps...)), 0o644)
		objName, eps = "", eps[:0]
		return err
	}
	endpoint := func(name, typ string, targets ...string) {
		eps = append(eps, testkit.EP(strings.TrimSuffix(name, "."), typ, 30, targets...))
	}
	count := 0
	for i := 0; i < n; i++ {
		if count%endpointsPerObject == 0 {
			if err := flush(count / endpointsPerObject); err != nil {
				return nil, err
			}
			objName = fmt.Sprintf("bench-%05d", count/endpointsPerObject)
		}
		h := HostName(i)
		endpoint(h, "A", AddrOf(i))
		fmt.Fprintf(&zone, "%s 30 IN A %s\n", h, AddrOf(i))
		fmt.Fprintf(&hosts, "%s %s\n", AddrOf(i), strings.TrimSuffix(h, "."))
		count++
		if i%2 == 0 {
			endpoint(h, "AAAA", Addr6Of(i))
			fmt.Fprintf(&zone, "%s 30 IN AAAA %s\n", h, Addr6Of(i))
			count++
		}
		if i%10 == 0 {
			endpoint(AliasName(i), "CNAME", strings.TrimSuffix(h, "."))
			fmt.Fprintf(&zone, "%s 30 IN CNAME %s\n", AliasName(i), h)
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
		fmt.Fprintf(&hits, "%s A\n", HostName(i))
		switch r := rng.Intn(100); {
		case r < 60: // hit
			fmt.Fprintf(&mix, "%s A\n", HostName(i))
		case r < 70: // NODATA: odd hosts have no AAAA
			fmt.Fprintf(&mix, "%s AAAA\n", HostName(i|1))
		case r < 80: // CNAME chain to an in-zone A
			fmt.Fprintf(&mix, "%s A\n", AliasName(i-i%10))
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

// Expect is what a correct server for d answers to a query of the query
// files: the rcode ("NOERROR", "NXDOMAIN") and the answer records as
// "TYPE rdata" (a CNAME chain's CNAME, then the A of its target), empty for
// NODATA. Names are absolute and lower case, as the files write them.
func (d *Dataset) Expect(name, qtype string) (rcode string, answer []string) {
	rest, ok := strings.CutSuffix(name, "."+d.Zone)
	if !ok {
		return "REFUSED", nil
	}
	var i int
	switch {
	case scanIndex(rest, "host-", &i) && i < d.Records:
		switch qtype {
		case "A":
			return "NOERROR", []string{"A " + AddrOf(i)}
		case "AAAA":
			if i%2 == 0 {
				return "NOERROR", []string{"AAAA " + Addr6Of(i)}
			}
		}
		return "NOERROR", nil // NODATA
	case scanIndex(rest, "alias-", &i) && i < d.Records && i%10 == 0:
		if qtype == "A" { // the chain is followed inside the zone
			return "NOERROR", []string{"CNAME " + HostName(i), "A " + AddrOf(i)}
		}
		return "NOERROR", []string{"CNAME " + HostName(i)}
	}
	return "NXDOMAIN", nil
}

// scanIndex reads label as prefix followed by a decimal number without
// leading zeros.
func scanIndex(label, prefix string, i *int) bool {
	num, ok := strings.CutPrefix(label, prefix)
	if !ok || num == "" || (len(num) > 1 && num[0] == '0') {
		return false
	}
	n := 0
	for _, c := range num {
		if c < '0' || c > '9' || n > 1<<30 {
			return false
		}
		n = n*10 + int(c-'0')
	}
	*i = n
	return true
}
