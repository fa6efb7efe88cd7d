package k8scrd

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/coredns/caddy"
	"github.com/coredns/coredns/plugin/pkg/dnstest"
	"github.com/coredns/coredns/plugin/test"
	"github.com/miekg/dns"
)

// newTestPlugin starts k8scrd on a temporary manifest folder holding files,
// with the Corefile block body given (the directory line is added).
func newTestPlugin(t testing.TB, zones, body string, files map[string]string) (*K8sCRD, string) {
	t.Helper()
	dir := t.TempDir()
	for name, content := range files {
		writeFile(t, dir, name, content)
	}
	c := caddy.NewTestController("dns", "k8scrd "+zones+" {\n directory "+dir+"\n"+body+"\n}")
	k, err := parse(c)
	if err != nil {
		t.Fatalf("parse: %v", err)
	}
	k.Next = test.NextHandler(dns.RcodeRefused, nil)
	if err := k.start(); err != nil {
		t.Fatalf("start: %v", err)
	}
	t.Cleanup(func() { k.shutdown() })
	if !k.Ready() {
		t.Fatal("not ready after start")
	}
	return k, dir
}

// writeFile writes a manifest into the plugin's folder (the directory source
// picks it up).
func writeFile(t testing.TB, dir, name, content string) {
	t.Helper()
	if err := os.WriteFile(filepath.Join(dir, name), []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
}

// ask sends one query to the handler and returns the reply (a copy: checks may sort it).
func ask(t testing.TB, k *K8sCRD, qname string, qtype uint16) (*dns.Msg, int) {
	t.Helper()
	m := new(dns.Msg)
	m.SetQuestion(qname, qtype)
	rec := dnstest.NewRecorder(&test.ResponseWriter{})
	code, err := k.ServeDNS(context.Background(), rec, m)
	if err != nil {
		t.Fatalf("%s %s: %v", qname, dns.TypeToString[qtype], err)
	}
	if rec.Msg == nil {
		return nil, code
	}
	return rec.Msg.Copy(), code
}

// check runs table cases against the handler: rcode, AA and all three sections.
func check(t *testing.T, k *K8sCRD, cases []test.Case) {
	t.Helper()
	for _, tc := range cases {
		resp, _ := ask(t, k, tc.Qname, tc.Qtype)
		if resp == nil {
			t.Errorf("%s %s: no reply written", tc.Qname, dns.TypeToString[tc.Qtype])
			continue
		}
		if resp.Authoritative != tc.Authoritative {
			t.Errorf("%s %s: AA is %v, want %v", tc.Qname, dns.TypeToString[tc.Qtype], resp.Authoritative, tc.Authoritative)
		}
		if err := test.SortAndCheck(resp, tc); err != nil {
			t.Errorf("%s %s: %v\n%s", tc.Qname, dns.TypeToString[tc.Qtype], err, resp)
		}
	}
}

// answers returns the answer section's records as text, in order.
func answers(m *dns.Msg) string {
	if m == nil {
		return "<no reply>"
	}
	var s []string
	for _, rr := range m.Answer {
		s = append(s, rr.String())
	}
	return strings.Join(s, "\n")
}
