package k8scrd

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/fleetdns/fleetdns/plugin/k8scrd/dirfeed"

	"github.com/coredns/caddy"
	"github.com/coredns/coredns/plugin/pkg/dnstest"
	"github.com/coredns/coredns/plugin/test"
	"github.com/fleetdns/fleetdns/internal/testkit"
	"github.com/fleetdns/fleetdns/plugin/k8scrd/builder"
	"github.com/miekg/dns"
)

// The fuzz targets below run their committed seeds (testdata/fuzz/<name>/)
// as ordinary tests; `make fuzz` explores further. Whatever the input, the
// plugin must answer or refuse, never panic.

// FuzzParse feeds arbitrary Corefile text to the k8scrd stanza parser: it
// returns a config or an error, never panics.
func FuzzParse(f *testing.F) {
	f.Add("k8scrd example.org {\n directory /nonexistent\n ttl 30\n}")
	f.Fuzz(func(t *testing.T, input string) {
		c := caddy.NewTestController("dns", input)
		k, err := parse(c)
		if err == nil && k == nil {
			t.Fatal("parse returned neither a plugin nor an error")
		}
	})
}

// fuzzManifests is the representative data FuzzServeDNS serves: every record
// type, a wildcard, a CNAME chain, a delegation with glue, an empty non-terminal.
var fuzzManifests = map[string]string{
	"zone.yaml": testkit.DNSEndpoint("default", "zone", nil,
		testkit.EP("www.example.org", "A", 60, "192.0.2.1", "192.0.2.2"),
		testkit.EP("www.example.org", "AAAA", 60, "2001:db8::1"),
		testkit.EP("alias.example.org", "CNAME", 0, "www.example.org"),
		testkit.EP("chain.example.org", "CNAME", 0, "alias.example.org"),
		testkit.EP("out.example.org", "CNAME", 0, "www.example.net"),
		testkit.EP("*.wild.example.org", "A", 0, "192.0.2.9"),
		testkit.EP("a.b.c.ent.example.org", "TXT", 0, "hello world"),
		testkit.EP("example.org", "MX", 0, "10 mail.example.org"),
		testkit.EP("mail.example.org", "A", 0, "192.0.2.25"),
		testkit.EP("_sip._tcp.example.org", "SRV", 0, "10 5 5060 sip.example.org"),
		testkit.EP("example.org", "CAA", 0, "0 issue \"letsencrypt.org\""),
		testkit.EP("sub.example.org", "NS", 0, "ns1.sub.example.org"),
		testkit.EP("ns1.sub.example.org", "A", 0, "192.0.2.53"),
		testkit.EP("big.example.org", "TXT", 0, "0123456789012345678901234567890123456789012345678901234567890123456789",
			"a0123456789012345678901234567890123456789012345678901234567890123456789",
			"b0123456789012345678901234567890123456789012345678901234567890123456789",
			"c0123456789012345678901234567890123456789012345678901234567890123456789",
			"d0123456789012345678901234567890123456789012345678901234567890123456789",
			"e0123456789012345678901234567890123456789012345678901234567890123456789",
			"f0123456789012345678901234567890123456789012345678901234567890123456789",
			"g0123456789012345678901234567890123456789012345678901234567890123456789")),
	"reverse.yaml": testkit.DNSEndpoint("default", "reverse", nil,
		testkit.EP("1.2.0.192.in-addr.arpa", "PTR", 0, "www.example.org")),
}

var (
	fuzzOnce   sync.Once
	fuzzPlugin *K8sCRD
	fuzzDir    string // removed by TestMain once every test and fuzz run is done
	fuzzErr    error
)

// fuzzServer starts one k8scrd on fuzzManifests for the whole fuzzing run.
func fuzzServer(tb testing.TB) *K8sCRD {
	fuzzOnce.Do(func() {
		dir, err := os.MkdirTemp("", "k8scrd-fuzz")
		if err != nil {
			fuzzErr = err
			return
		}
		fuzzDir = dir
		for name, content := range fuzzManifests {
			if err := os.WriteFile(filepath.Join(dir, name), []byte(content), 0o644); err != nil {
				fuzzErr = err
				return
			}
		}
		c := caddy.NewTestController("dns", "k8scrd example.org 2.0.192.in-addr.arpa {\n directory "+dir+"\n soa ns1.example.org hostmaster.example.org\n}")
		k, err := parse(c)
		if err != nil {
			fuzzErr = err
			return
		}
		k.Next = test.NextHandler(dns.RcodeRefused, nil)
		if err := k.start(); err != nil {
			fuzzErr = err
			return
		}
		// Wait for the builder to publish the manifests (it coalesces over a short delay).
		testkit.Within(5*time.Second, func() bool { return k.snap.Load().Get("www.example.org.") != nil })
		if k.snap.Load().Get("*.wild.example.org.") == nil {
			fuzzErr = errors.New("fuzz manifests not loaded")
			return
		}
		fuzzPlugin = k
	})
	if fuzzErr != nil {
		tb.Fatal(fuzzErr)
	}
	return fuzzPlugin
}

// FuzzServeDNS serves arbitrary wire-format queries: whatever unpacks is
// answered (or refused) without a panic, and the reply packs.
func FuzzServeDNS(f *testing.F) {
	for _, q := range []struct {
		name  string
		qtype uint16
	}{
		{"www.example.org.", dns.TypeA}, {"WWW.Example.ORG.", dns.TypeAAAA}, {"chain.example.org.", dns.TypeA},
		{"x.wild.example.org.", dns.TypeANY}, {"c.ent.example.org.", dns.TypeTXT}, {"host.sub.example.org.", dns.TypeA},
		{"sub.example.org.", dns.TypeDS}, {"example.org.", dns.TypeSOA}, {"example.org.", dns.TypeAXFR},
	} {
		m := new(dns.Msg)
		m.SetQuestion(q.name, q.qtype)
		m.SetEdns0(1232, true)
		b, _ := m.Pack()
		f.Add(b)
	}
	f.Fuzz(func(t *testing.T, wire []byte) {
		k := fuzzServer(t)
		r := new(dns.Msg)
		if r.Unpack(wire) != nil || len(r.Question) == 0 {
			return // the server answers FORMERR before any plugin sees it
		}
		rec := dnstest.NewRecorder(&test.ResponseWriter{})
		if _, err := k.ServeDNS(context.Background(), rec, r); err != nil {
			return
		}
		if rec.Msg != nil {
			if _, err := rec.Msg.Pack(); err != nil {
				t.Fatalf("reply does not pack: %v\n%s", err, rec.Msg)
			}
		}
	})
}

// FuzzManifest decodes arbitrary bytes as a manifest file of the directory
// source and applies what it holds to a fresh store: bad documents and
// endpoints are skipped, nothing panics, and the store still answers.
func FuzzManifest(f *testing.F) {
	for _, m := range fuzzManifests {
		f.Add([]byte(m))
	}
	f.Fuzz(func(t *testing.T, raw []byte) {
		cfg := newConfig()
		cfg.Zones = []string{"example.org.", "2.0.192.in-addr.arpa."}
		docs, _ := dirfeed.ParseManifests("fuzz.yaml", raw, time.Unix(1700000000, 0), cfg.dirConfig())
		k := &K8sCRD{Zones: cfg.Zones, cfg: cfg}
		b := builder.New(cfg.buildConfig(), &k.snap)
		for _, d := range docs {
			if d.Obj == nil {
				t.Fatal("document without object")
			}
			b.Upsert(d.Obj)
		}
		b.Synced()
		b.Flush()
		k.Next = test.NextHandler(dns.RcodeRefused, nil)
		for _, d := range docs {
			for name := range d.Obj.Names {
				for _, qt := range []uint16{dns.TypeA, dns.TypeANY, dns.TypeCNAME} {
					m := new(dns.Msg)
					m.SetQuestion(name, qt)
					rec := dnstest.NewRecorder(&test.ResponseWriter{})
					k.ServeDNS(context.Background(), rec, m)
				}
			}
		}
		// Removing everything again leaves an empty, serving store.
		for _, d := range docs {
			b.Remove(d.Obj.Key)
		}
		b.Flush()
		m := new(dns.Msg)
		m.SetQuestion("example.org.", dns.TypeSOA)
		rec := dnstest.NewRecorder(&test.ResponseWriter{})
		if _, err := k.ServeDNS(context.Background(), rec, m); err != nil || rec.Msg == nil || len(rec.Msg.Answer) != 1 {
			t.Fatalf("empty store does not answer its SOA: %v %v", err, rec.Msg)
		}
	})
}
