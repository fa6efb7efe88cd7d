package main

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/fleetdns/fleetdns/internal/testkit"
	"github.com/fleetdns/fleetdns/test/bench/benchkit"

	"github.com/miekg/dns"
)

// authGroup: k8scrd, file and hosts serving the same benchkit dataset, each
// its own process; hits for all three, the mix for k8scrd and file (hosts
// cannot answer NODATA or CNAME chains as they do).
func authGroup(e *env) (*group, error) {
	g := &group{name: "authoritative"}
	d, err := benchkit.GenDataset(filepath.Join(e.dir, "auth"), *flagRecords)
	if err != nil {
		return g, err
	}
	split := func(path string) (warm, qs []query, err error) {
		all, err := readQueries(path, *flagWarm+*flagQueries)
		if err != nil {
			return nil, nil, err
		}
		return all[:*flagWarm], all[*flagWarm:], nil
	}
	hitsWarm, hits, err := split(d.Hits)
	if err != nil {
		return g, err
	}
	mixWarm, mix, err := split(d.Mix)
	if err != nil {
		return g, err
	}
	check := checkAll(func(q query) (string, []string) { return d.Expect(q.name, q.qtype) })
	probe := query{benchkit.HostName(0), "A", false}

	plugins := map[string]string{
		"k8scrd": fmt.Sprintf("k8scrd {\n        directory %s\n    }", d.ManifestDir),
		"file":   "file " + d.ZoneFile,
		"hosts":  fmt.Sprintf("hosts %s {\n        no_reverse\n    }", d.HostsFile),
	}
	var specs []serverSpec
	addrs := map[string]string{}
	srvIndex := map[string]int{}
	for _, name := range []string{"k8scrd", "file", "hosts"} {
		ip := e.ip()
		addrs[name] = e.hostport(ip)
		srvIndex[name] = len(specs)
		specs = append(specs, serverSpec{
			name:     name,
			corefile: fmt.Sprintf("example.bench:%d {\n    bind %s\n    %s\n    PPROF\n}\n", *flagPort, ip, plugins[name]),
			addr:     addrs[name], pprof: ip + ":6053", probe: probe, check: check,
		})
	}
	if err := startAll(e, g, specs); err != nil {
		return g, err
	}
	add := func(server, mixName string, warm, qs []query, baseline string) {
		g.rows = append(g.rows, &row{group: g.name, name: server + ", " + mixName, baseline: baseline,
			srv: g.servers[srvIndex[server]], addr: addrs[server], warm: warm, qs: qs, check: check})
	}
	add("k8scrd", "hits", hitsWarm, hits, "file, hits")
	add("file", "hits", hitsWarm, hits, "")
	add("hosts", "hits", hitsWarm, hits, "file, hits")
	add("k8scrd", "mix", mixWarm, mix, "file, mix")
	add("file", "mix", mixWarm, mix, "")
	return g, nil
}

// The sources comparison: one host derived from an Ingress and one from a
// DNSEndpoint, with the same target, beside benchkit's data set.
const (
	ingressHost  = "shop.example.bench"
	endpointHost = "dep.example.bench"
	sourceTarget = "198.18.0.1" // data, never contacted (no health checks)
)

// sourcesManifest is the Ingress (its backend Service and an EndpointSlice
// with one ready endpoint) and the DNSEndpoint of the sources comparison.
const sourcesManifest = `apiVersion: networking.k8s.io/v1
kind: Ingress
metadata: {name: shop, namespace: apps}
spec:
  rules:
  - host: ` + ingressHost + `
    http:
      paths:
      - {path: /, pathType: Prefix, backend: {service: {name: shop, port: {number: 80}}}}
status:
  loadBalancer:
    ingress: [{ip: ` + sourceTarget + `}]
---
apiVersion: v1
kind: Service
metadata: {name: shop, namespace: apps}
spec:
  clusterIP: None
  ports: [{name: http, port: 80}]
---
apiVersion: discovery.k8s.io/v1
kind: EndpointSlice
metadata:
  name: shop-1
  namespace: apps
  labels: {kubernetes.io/service-name: shop, endpointslice.kubernetes.io/managed-by: endpointslice-controller.k8s.io}
addressType: IPv4
endpoints: [{addresses: [198.19.0.1], conditions: {ready: true}}]
ports: [{name: http, port: 80, protocol: TCP}]
---
apiVersion: externaldns.k8s.io/v1alpha1
kind: DNSEndpoint
metadata: {name: dep, namespace: apps}
spec:
  endpoints: [{dnsName: ` + endpointHost + `, recordType: A, targets: [` + sourceTarget + `]}]
`

// sourcesGroup: one server whose k8scrd reads benchkit's data set (-records
// hosts) and the sources manifest from one directory with `resources
// DNSEndpoint Ingress`, beside localtargets: the A answer and the
// localtargets- answer (what peers ask) of the Ingress host and of the
// DNSEndpoint host, in the same zone of the same size.
func sourcesGroup(e *env) (*group, error) {
	g := &group{name: "sources"}
	d, err := benchkit.GenDataset(filepath.Join(e.dir, "sources"), *flagRecords)
	if err != nil {
		return g, err
	}
	if err := os.WriteFile(filepath.Join(d.ManifestDir, "sources.yaml"), []byte(sourcesManifest), 0o644); err != nil {
		return g, err
	}
	ip := e.ip()
	addr := e.hostport(ip)
	corefile := fmt.Sprintf("example.bench:%d {\n    bind %s\n    localtargets\n    k8scrd {\n        directory %s\n        resources DNSEndpoint Ingress\n    }\n    PPROF\n}\n",
		*flagPort, ip, d.ManifestDir)
	check := sameAnswer("NOERROR", "A "+sourceTarget)
	if err := startAll(e, g, []serverSpec{{name: "sources", corefile: corefile, addr: addr, pprof: ip + ":6053",
		probe: query{"localtargets-" + ingressHost + ".", "A", false}, check: check}}); err != nil {
		return g, err
	}
	for _, r := range []struct{ name, host, baseline string }{
		{"Ingress host", ingressHost, "DNSEndpoint host"},
		{"DNSEndpoint host", endpointHost, ""},
		{"localtargets- of the Ingress host", "localtargets-" + ingressHost, "localtargets- of the DNSEndpoint host"},
		{"localtargets- of the DNSEndpoint host", "localtargets-" + endpointHost, ""},
	} {
		q := query{r.host + ".", "A", false}
		g.rows = append(g.rows, &row{group: g.name, name: r.name, baseline: r.baseline, srv: g.servers[0], addr: addr,
			warm: repeat(q, *flagWarm), qs: repeat(q, *flagQueries), check: check})
	}
	return g, nil
}

// The GSLB fleet: this cluster (eu, measured) and two peers (us, ap, native).
const (
	gslbZone  = "gslb.example.com"
	plainZone = "plain.example.net"
	gslbHost  = "rr." + gslbZone
	geoHost   = "geo." + gslbZone
	foHost    = "fo." + gslbZone   // failover, primary eu
	tierHost  = "tier." + gslbZone // failover, tiers eu+us then ap, eu=70 us=30
	plainHost = "www." + plainZone
)

var gslbTargets = map[string][]string{
	"eu": {"10.10.0.1", "10.10.0.2"},
	"us": {"10.20.0.1"},
	"ap": {"10.30.0.1"},
}

// gslbGroup: the eu server answers a roundRobin gslb host whose answer is
// assembled from its own targets and two peers' localtargets- answers, its
// own localtargets- answer (what the peers ask it), and, in the same server
// block, a plain k8scrd host with the same four targets.
// Peer answers carry recordTTL 300 and gslb's refresh is 60s, so no peer
// refresh falls into a window after the warm-up (the idle windows show the
// background that remains: the store walk every 5 s, Go's sysmon).
func gslbGroup(e *env) (*group, error) {
	g := &group{name: "gslb"}
	all := append(append(append([]string(nil), gslbTargets["eu"]...), gslbTargets["us"]...), gslbTargets["ap"]...)
	ips := map[string]string{}
	for _, tag := range []string{"eu", "us", "ap"} {
		ips[tag] = e.ip()
		dir := filepath.Join(e.dir, "gslb-"+tag)
		if err := os.MkdirAll(dir, 0o755); err != nil {
			return g, err
		}
		eps := []testkit.Endpoint{
			{DNSName: gslbHost, RecordType: "A", TTL: 300, Targets: gslbTargets[tag], ProviderSpecific: [][2]string{{"gslb/strategy", "roundRobin"}}},
			{DNSName: geoHost, RecordType: "A", TTL: 300, Targets: gslbTargets[tag], ProviderSpecific: [][2]string{{"gslb/strategy", "geoip"}}},
			{DNSName: foHost, RecordType: "A", TTL: 300, Targets: gslbTargets[tag], ProviderSpecific: [][2]string{{"gslb/strategy", "failover"}, {"gslb/primary", "eu"}}},
			{DNSName: tierHost, RecordType: "A", TTL: 300, Targets: gslbTargets[tag], ProviderSpecific: [][2]string{
				{"gslb/strategy", "failover"}, {"gslb/primary", "eu+us,ap"}, {"gslb/weight", "eu=70,us=30"}}},
		}
		if tag == "eu" {
			eps = append(eps, testkit.EP(plainHost, "A", 300, all...))
		}
		if err := os.WriteFile(filepath.Join(dir, "hosts.yaml"), []byte(testkit.DNSEndpoint("apps", "gslb-hosts", nil, eps...)), 0o644); err != nil {
			return g, err
		}
		if tag == "eu" {
			continue
		}
		cf := filepath.Join(e.dir, "peer-"+tag+".Corefile")
		body := fmt.Sprintf("%s:%d {\n    bind %s\n    localtargets\n    k8scrd %s {\n        directory %s\n    }\n}\n",
			gslbZone, *flagPort, ips[tag], gslbZone, dir)
		if err := os.WriteFile(cf, []byte(body), 0o644); err != nil {
			return g, err
		}
		if err := startNative(e, g, "peer-"+tag, e.bin, "-conf", cf); err != nil {
			return g, err
		}
		if err := waitAnswer(e.hostport(ips[tag]), query{"localtargets-" + gslbHost + ".", "A", false},
			sameAnswer("NOERROR", prefixed("A ", gslbTargets[tag])...), time.Minute, nil); err != nil {
			return g, fmt.Errorf("peer %s: %v", tag, err)
		}
	}
	eu := e.hostport(ips["eu"])
	corefile := fmt.Sprintf(`%[1]s:%[2]d %[3]s:%[2]d {
    bind %[4]s
    localtargets
    gslb %[1]s {
        geotag eu
        peer us %[5]s
        peer ap %[6]s
        strategy roundRobin
        geo cidr 10.1.0.0/16 eu
        geo cidr 10.2.0.0/16 us
        geo cidr 127.0.0.0/8 ap
        timeout 2s
        refresh 60s
        split_brain_threshold 10m
        ttl 5
    }
    k8scrd %[1]s %[3]s {
        directory %[7]s
    }
    PPROF
}
`, gslbZone, *flagPort, plainZone, ips["eu"], e.hostport(ips["us"]), e.hostport(ips["ap"]), filepath.Join(e.dir, "gslb-eu"))
	check := sameAnswer("NOERROR", prefixed("A ", all)...)
	// The signed twin: the same server block with the stock dnssec plugin
	// in front (one CSK, the shipped signature cache), on its own address.
	euSigned := e.ip()
	var keys []string
	for _, z := range []string{gslbZone, plainZone} {
		key, err := writeCSK(e.dir, z)
		if err != nil {
			return g, err
		}
		keys = append(keys, key)
	}
	signed := strings.Replace(strings.Replace(corefile, "bind "+ips["eu"], "bind "+euSigned, 1),
		"    localtargets\n", fmt.Sprintf("    dnssec %s %s {\n        key file %s\n        cache_capacity 100000\n    }\n    localtargets\n",
			gslbZone, plainZone, strings.Join(keys, " ")), 1)
	err := startAll(e, g, []serverSpec{
		{name: "gslb-eu", corefile: corefile, addr: eu, pprof: ips["eu"] + ":6053", probe: query{gslbHost + ".", "A", false}, check: check},
		{name: "gslb-eu-signed", corefile: signed, addr: e.hostport(euSigned), pprof: euSigned + ":6053",
			probe: query{gslbHost + ".", "A", true}, check: signedAnswer(check)},
	})
	if err != nil {
		return g, err
	}
	// The geoip host: the client (loopback) maps to ap through `geo cidr`.
	geoCheck := sameAnswer("NOERROR", prefixed("A ", gslbTargets["ap"])...)
	// What a peer asks: eu runs the same localtargets as the peers, so the
	// answer the peers give is measured on eu, without a fourth server.
	localCheck := sameAnswer("NOERROR", prefixed("A ", gslbTargets["eu"])...)
	euOnly, usOnly := localCheck, sameAnswer("NOERROR", prefixed("A ", gslbTargets["us"])...)
	for _, r := range []struct {
		name, host, baseline string
		check                checker
	}{
		{"gslb host, roundRobin, 2 peers", gslbHost, "plain k8scrd host", check},
		{"gslb host, geoip by source address, 2 peers", geoHost, "plain k8scrd host", geoCheck},
		{"localtargets answer", "localtargets-" + gslbHost, "plain k8scrd host", localCheck},
		{"plain k8scrd host", plainHost, "", check},
		{"failover host, primary eu", foHost, "", euOnly},
		{"composed host, tiers eu+us,ap by weight", tierHost, "failover host, primary eu", oneOf(euOnly, usOnly)},
	} {
		q := query{r.host + ".", "A", false}
		g.rows = append(g.rows, &row{group: g.name, name: r.name, baseline: r.baseline, srv: g.servers[0], addr: eu,
			warm: repeat(q, *flagWarm), qs: repeat(q, *flagQueries), check: r.check})
	}
	// The same answers signed (DO set), against themselves unsigned.
	for _, r := range []struct {
		name, host, baseline string
		check                checker
	}{
		{"signed: gslb host, roundRobin, 2 peers", gslbHost, "gslb host, roundRobin, 2 peers", check},
		{"signed: gslb host, geoip by source address, 2 peers", geoHost, "gslb host, geoip by source address, 2 peers", geoCheck},
		{"signed: plain k8scrd host", plainHost, "plain k8scrd host", check},
	} {
		q := query{r.host + ".", "A", true}
		g.rows = append(g.rows, &row{group: g.name, name: r.name, baseline: r.baseline, srv: g.servers[1], addr: e.hostport(euSigned),
			warm: repeat(q, *flagWarm), qs: repeat(q, *flagQueries), check: signedAnswer(r.check)})
	}
	return g, nil
}

// writeCSK writes a fresh ECDSA P-256 key with the SEP flag (a combined
// signing key) for zone in BIND's K<zone>+013+<tag>.{key,private} files,
// as the dnssec plugin reads them; it returns the path without extension.
func writeCSK(dir, zone string) (string, error) {
	k := &dns.DNSKEY{Hdr: dns.RR_Header{Name: dns.Fqdn(zone), Rrtype: dns.TypeDNSKEY, Class: dns.ClassINET, Ttl: 3600},
		Flags: 257, Protocol: 3, Algorithm: dns.ECDSAP256SHA256}
	priv, err := k.Generate(256)
	if err != nil {
		return "", err
	}
	base := filepath.Join(dir, fmt.Sprintf("K%s+%03d+%05d", dns.Fqdn(zone), k.Algorithm, k.KeyTag()))
	if err := os.WriteFile(base+".key", []byte(k.String()+"\n"), 0o644); err != nil {
		return "", err
	}
	return base, os.WriteFile(base+".private", []byte(k.PrivateKeyString(priv)), 0o600)
}

func prefixed(p string, ss []string) []string {
	out := make([]string, len(ss))
	for i, s := range ss {
		out[i] = p + s
	}
	return out
}

// splitdnsGroup: splitdns with one route and with -routes routes against
// stock forward with one zone block plus ".", all to one upstream
// (test/bench/bare, native), with test/bench/splitdns's query names.
func splitdnsGroup(e *env) (*group, error) {
	g := &group{name: "splitdns"}
	upIP := e.ip()
	up := e.hostport(upIP)
	if err := startNative(e, g, "upstream", e.bare, "-addr", up); err != nil {
		return g, err
	}
	check := sameAnswer("NOERROR", "A 192.0.2.1")
	if err := waitAnswer(up, query{"probe.example.com.", "A", false}, check, time.Minute, nil); err != nil {
		return g, fmt.Errorf("upstream: %v", err)
	}
	// The names of test/bench/splitdns: nine in ten under zone-0.corp ...
	// zone-999.corp, one in ten outside every zone. The warm-up covers
	// every zone at least once, so that no route meets its first query in
	// a window.
	name := func(i int) query {
		if i%10 == 9 {
			return query{fmt.Sprintf("host-%d.example.com.", i), "A", false}
		}
		return query{fmt.Sprintf("host-%d.svc.zone-%d.corp.", i, i%1000), "A", false}
	}
	var warm, qs []query
	for i := range max(*flagWarm, 1000) {
		warm = append(warm, name(i))
	}
	for i := range *flagQueries {
		qs = append(qs, name(*flagWarm+i))
	}
	splitdns := func(routes int, ip string) string {
		var b strings.Builder
		fmt.Fprintf(&b, ".:%d {\n    bind %s\n    splitdns {\n", *flagPort, ip)
		for i := range routes {
			fmt.Fprintf(&b, "        route zone-%d.corp %s\n", i, up)
		}
		fmt.Fprintf(&b, "        default %s\n    }\n    PPROF\n}\n", up)
		return b.String()
	}
	forward := func(ip string) string {
		return fmt.Sprintf("zone-0.corp:%[1]d {\n    bind %[2]s\n    forward . %[3]s\n}\n.:%[1]d {\n    bind %[2]s\n    forward . %[3]s\n    PPROF\n}\n",
			*flagPort, ip, up)
	}
	type cfg struct{ name, corefile, ip, baseline string }
	var cfgs []cfg
	for _, c := range []struct {
		name, baseline string
		corefile       func(ip string) string
	}{
		{"splitdns, 1 route", "forward, 1 zone", func(ip string) string { return splitdns(1, ip) }},
		{"forward, 1 zone", "", forward},
		{fmt.Sprintf("splitdns, %d routes", *flagRoutes), "splitdns, 1 route", func(ip string) string { return splitdns(*flagRoutes, ip) }},
	} {
		ip := e.ip()
		cfgs = append(cfgs, cfg{c.name, c.corefile(ip), ip, c.baseline})
	}
	var specs []serverSpec
	for _, c := range cfgs {
		specs = append(specs, serverSpec{name: strings.NewReplacer(", ", "-", " ", "-").Replace(c.name), corefile: c.corefile,
			addr: e.hostport(c.ip), pprof: c.ip + ":6053", probe: query{"host-1.svc.zone-0.corp.", "A", false}, check: check})
	}
	if err := startAll(e, g, specs); err != nil {
		return g, err
	}
	for i, c := range cfgs {
		g.rows = append(g.rows, &row{group: g.name, name: c.name, baseline: c.baseline, srv: g.servers[i], addr: e.hostport(c.ip),
			warm: warm, qs: qs, check: check})
	}
	return g, nil
}
