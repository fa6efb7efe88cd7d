package fleet

import (
	"encoding/base64"
	"fmt"
	"os"
	"strings"
	"time"

	"github.com/miekg/dns"
)

// Keys are the fleet's TSIG keys: the first signs, any verifies. A nil *Keys
// is valid and means no TSIG: nothing is signed and nothing is required.
type Keys struct {
	keys    []key
	secrets map[string]string
}

type key struct {
	name      string // fully qualified, lower case
	algorithm string // fully qualified, as dns.HmacSHA256
	secret    string // base64
}

// fudge is the TSIG time window, seconds (RFC 8945 §10 recommends 300).
const fudge = 300

// algorithms are the TSIG algorithms a key file may name.
var algorithms = map[string]string{
	"hmac-sha256": dns.HmacSHA256,
	"hmac-sha384": dns.HmacSHA384,
	"hmac-sha512": dns.HmacSHA512,
}

// LoadKeys reads one or two keys from path, in the format of BIND's
// tsig-keygen:
//
//	key "fleet" {
//		algorithm hmac-sha256;
//		secret "base64==";
//	};
//
// The algorithms are hmac-sha256, hmac-sha384 and hmac-sha512. Comments
// (#, // and /* */) are allowed. Errors name the file and the line.
func LoadKeys(path string) (*Keys, error) {
	text, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	return ParseKeys(path, text)
}

// ParseKeys is LoadKeys on the text of a key file; name is used in errors.
func ParseKeys(name string, text []byte) (*Keys, error) {
	toks, err := tokenize(name, string(text))
	if err != nil {
		return nil, err
	}
	k := &Keys{secrets: map[string]string{}}
	i := 0
	next := func() token {
		if i < len(toks) {
			i++
			return toks[i-1]
		}
		line := 1
		if len(toks) > 0 {
			line = toks[len(toks)-1].line
		}
		return token{line: line, eof: true}
	}
	errf := func(t token, format string, a ...any) error {
		return fmt.Errorf("%s:%d: %s", name, t.line, fmt.Sprintf(format, a...))
	}
	expect := func(want string) error {
		t := next()
		if t.eof || t.quoted || t.text != want {
			return errf(t, "expected %q, found %s", want, t)
		}
		return nil
	}
	for i < len(toks) {
		t := next()
		if t.quoted || t.text != "key" {
			return nil, errf(t, "expected \"key\", found %s", t)
		}
		nt := next()
		if nt.eof || (!nt.quoted && (nt.text == "{" || nt.text == ";")) {
			return nil, errf(nt, "expected a key name, found %s", nt)
		}
		kname := dns.CanonicalName(nt.text)
		if _, ok := dns.IsDomainName(kname); !ok {
			return nil, errf(nt, "key name %q is not a domain name", nt.text)
		}
		if _, dup := k.secrets[kname]; dup {
			return nil, errf(nt, "key %q defined twice", nt.text)
		}
		if err := expect("{"); err != nil {
			return nil, err
		}
		kk := key{name: kname}
		for {
			st := next()
			if st.eof {
				return nil, errf(st, "key %q: missing \"}\"", nt.text)
			}
			if !st.quoted && st.text == "}" {
				break
			}
			switch {
			case !st.quoted && st.text == "algorithm":
				at := next()
				alg, ok := algorithms[strings.ToLower(at.text)]
				if at.eof || !ok {
					return nil, errf(at, "key %q: algorithm %s is not one of hmac-sha256, hmac-sha384, hmac-sha512", nt.text, at)
				}
				kk.algorithm = alg
			case !st.quoted && st.text == "secret":
				at := next()
				if at.eof || (!at.quoted && (at.text == ";" || at.text == "}")) {
					return nil, errf(at, "key %q: expected a secret, found %s", nt.text, at)
				}
				b, err := base64.StdEncoding.DecodeString(at.text)
				if err != nil || len(b) == 0 {
					return nil, errf(at, "key %q: secret is not base64", nt.text)
				}
				kk.secret = at.text
			default:
				return nil, errf(st, "key %q: unknown word %s (want algorithm or secret)", nt.text, st)
			}
			if err := expect(";"); err != nil {
				return nil, err
			}
		}
		if err := expect(";"); err != nil {
			return nil, err
		}
		if kk.algorithm == "" {
			return nil, errf(nt, "key %q has no algorithm", nt.text)
		}
		if kk.secret == "" {
			return nil, errf(nt, "key %q has no secret", nt.text)
		}
		if len(k.keys) == 2 {
			return nil, errf(t, "more than two keys (one signs, at most two verify)")
		}
		k.keys = append(k.keys, kk)
		k.secrets[kname] = kk.secret
	}
	if len(k.keys) == 0 {
		return nil, fmt.Errorf("%s: no key", name)
	}
	return k, nil
}

type token struct {
	text   string
	line   int
	quoted bool
	eof    bool
}

func (t token) String() string {
	switch {
	case t.eof:
		return "end of file"
	case t.quoted:
		return fmt.Sprintf("%q", t.text)
	}
	return "\"" + t.text + "\""
}

// tokenize splits a named.conf-style text into words, quoted strings and the
// punctuation { } ;, dropping comments.
func tokenize(name, s string) ([]token, error) {
	var toks []token
	line := 1
	for i := 0; i < len(s); {
		c := s[i]
		switch {
		case c == '\n':
			line++
			i++
		case c == ' ' || c == '\t' || c == '\r':
			i++
		case c == '#' || (c == '/' && i+1 < len(s) && s[i+1] == '/'):
			for i < len(s) && s[i] != '\n' {
				i++
			}
		case c == '/' && i+1 < len(s) && s[i+1] == '*':
			start := line
			end := strings.Index(s[i+2:], "*/")
			if end < 0 {
				return nil, fmt.Errorf("%s:%d: unterminated comment", name, start)
			}
			line += strings.Count(s[i:i+2+end], "\n")
			i += end + 4
		case c == '{' || c == '}' || c == ';':
			toks = append(toks, token{text: string(c), line: line})
			i++
		case c == '"':
			end := strings.IndexAny(s[i+1:], "\"\n")
			if end < 0 || s[i+1+end] != '"' {
				return nil, fmt.Errorf("%s:%d: unterminated string", name, line)
			}
			toks = append(toks, token{text: s[i+1 : i+1+end], line: line, quoted: true})
			i += end + 2
		default:
			j := i
			for j < len(s) && !strings.ContainsRune(" \t\r\n{};\"#", rune(s[j])) {
				j++
			}
			toks = append(toks, token{text: s[i:j], line: line})
			i = j
		}
	}
	return toks, nil
}

// Secrets returns key name to secret, for dns.Server.TsigSecret,
// dns.Client.TsigSecret and dns.Transfer.TsigSecret. Nil when k is nil.
func (k *Keys) Secrets() map[string]string {
	if k == nil {
		return nil
	}
	s := make(map[string]string, len(k.secrets))
	for n, v := range k.secrets {
		s[n] = v
	}
	return s
}

// Sign adds a TSIG record for the first (current) key to m; the client or
// server that writes m computes the MAC. Nothing when k is nil.
func (k *Keys) Sign(m *dns.Msg) {
	if k == nil {
		return
	}
	m.SetTsig(k.keys[0].name, k.keys[0].algorithm, fudge, time.Now().Unix())
}

// Verified reports whether request r, served through w, is signed with one of
// the keys and its signature checked out (w.TsigStatus() == nil). It is true
// when k is nil (no keys, nothing required). For gslb's NOTIFY acceptance.
//
// Only a dns.Server that has the secrets (TsigSecret, see Secrets) checks a
// signature: one without any reports every TSIG as good, so a server that
// serves the fleet with keys must be given them.
func (k *Keys) Verified(w dns.ResponseWriter, r *dns.Msg) bool {
	if k == nil {
		return true
	}
	t := r.IsTsig()
	if t == nil || w.TsigStatus() != nil {
		return false
	}
	_, ok := k.secrets[dns.CanonicalName(t.Hdr.Name)]
	return ok
}

// signReply signs reply m to request r with r's key when r was validly
// signed with one of the keys (RFC 8945 §5.3: the response uses the
// request's key).
func (k *Keys) signReply(w dns.ResponseWriter, r, m *dns.Msg) {
	if k == nil || !k.Verified(w, r) {
		return
	}
	t := r.IsTsig()
	m.SetTsig(t.Hdr.Name, t.Algorithm, fudge, time.Now().Unix())
}
