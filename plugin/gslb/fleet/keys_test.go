package fleet

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/miekg/dns"
)

const (
	secretA = "c2VjcmV0LWEtc2VjcmV0LWEtc2VjcmV0LWEtc2VjcmV0LWE="
	secretB = "c2VjcmV0LWItc2VjcmV0LWItc2VjcmV0LWItc2VjcmV0LWI="
)

func TestKeysFromTsigKeygenFormat(t *testing.T) {
	text := `# made by tsig-keygen
key "fleet-2026" {
	algorithm hmac-sha256;
	secret "` + secretA + `";
};
/* the next key,
   added for rotation */
key fleet-2027 { algorithm HMAC-SHA512; secret "` + secretB + `"; }; // second
`
	k, err := ParseKeys("fleet.key", []byte(text))
	if err != nil {
		t.Fatal(err)
	}
	s := k.Secrets()
	if len(s) != 2 || s["fleet-2026."] != secretA || s["fleet-2027."] != secretB {
		t.Fatalf("secrets %v, want both keys", s)
	}
	m := new(dns.Msg)
	m.SetQuestion("_fleet.example.org.", dns.TypeSOA)
	k.Sign(m)
	if ts := m.IsTsig(); ts == nil || ts.Hdr.Name != "fleet-2026." || ts.Algorithm != dns.HmacSHA256 {
		t.Fatalf("signed with %v, want the first key, hmac-sha256", m.IsTsig())
	}
	if k.keys[1].algorithm != dns.HmacSHA512 {
		t.Errorf("second key algorithm %s, want %s", k.keys[1].algorithm, dns.HmacSHA512)
	}
}

func TestKeyFileErrorsNameTheLine(t *testing.T) {
	key := func(name, alg, secret string) string {
		return "key \"" + name + "\" {\n\talgorithm " + alg + ";\n\tsecret \"" + secret + "\";\n};\n"
	}
	tests := []struct {
		name, text, want string
	}{
		{"empty", "# nothing\n", "k.key: no key"},
		{"algorithm", key("a", "hmac-md5", secretA), "k.key:2: key \"a\": algorithm \"hmac-md5\" is not one of"},
		{"secret", key("a", "hmac-sha256", "not base64!"), "k.key:3: key \"a\": secret is not base64"},
		{"semicolon", "key \"a\" {\n\talgorithm hmac-sha256\n\tsecret \"" + secretA + "\";\n};\n", "k.key:3: expected \";\", found \"secret\""},
		{"unknown word", "key \"a\" {\n\talgorithm hmac-sha256;\n\tsecrett \"x\";\n};\n", "k.key:3: key \"a\": unknown word \"secrett\""},
		{"no secret", "key \"a\" {\n\talgorithm hmac-sha256;\n};\n", "k.key:1: key \"a\" has no secret"},
		{"three keys", key("a", "hmac-sha256", secretA) + key("b", "hmac-sha256", secretB) + key("c", "hmac-sha256", secretA), "k.key:9: more than two keys"},
		{"twice", key("a", "hmac-sha256", secretA) + key("A.", "hmac-sha256", secretB), "k.key:5: key \"A.\" defined twice"},
		{"unterminated", "key \"a {\n", "k.key:1: unterminated string"},
		{"missing brace", "key \"a\" {\n\talgorithm hmac-sha256;\n", "k.key:2: key \"a\": missing \"}\""},
		{"not key", "server 1.2.3.4 { };\n", "k.key:1: expected \"key\", found \"server\""},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, err := ParseKeys("k.key", []byte(tc.text))
			if err == nil || !strings.HasPrefix(err.Error(), tc.want) {
				t.Fatalf("error %v, want it to start with %q", err, tc.want)
			}
		})
	}
}

func TestLoadKeysNamesTheFile(t *testing.T) {
	p := filepath.Join(t.TempDir(), "fleet.key")
	if _, err := LoadKeys(p); err == nil || !strings.Contains(err.Error(), p) {
		t.Fatalf("missing file: error %v, want it to name %s", err, p)
	}
	os.WriteFile(p, []byte("key \"a\" {\n algorithm hmac-sha256;\n secret \"??\";\n};\n"), 0o600)
	if _, err := LoadKeys(p); err == nil || !strings.HasPrefix(err.Error(), p+":3:") {
		t.Fatalf("bad secret: error %v, want %s:3:", err, p)
	}
}

func TestNilKeysSignNothingAndRequireNothing(t *testing.T) {
	var k *Keys
	m := new(dns.Msg)
	m.SetQuestion("_fleet.example.org.", dns.TypeSOA)
	k.Sign(m)
	if m.IsTsig() != nil || k.Secrets() != nil || !k.Verified(nil, m) {
		t.Fatal("nil Keys should sign nothing, have no secrets, and verify everything")
	}
}
