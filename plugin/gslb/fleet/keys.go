package fleet

import "github.com/miekg/dns"

// Keys are the fleet's TSIG keys: the first signs, any verifies. A nil *Keys
// is valid and means no TSIG: nothing is signed and nothing is required.
type Keys struct {
	keys []key
}

type key struct {
	name      string // fully qualified, lower case
	algorithm string // fully qualified, as dns.HmacSHA256
	secret    string // base64
}

// LoadKeys reads one or two keys from path, in the format of BIND's
// tsig-keygen:
//
//	key "fleet" {
//		algorithm hmac-sha256;
//		secret "base64==";
//	};
//
// The algorithms are hmac-sha256, hmac-sha384 and hmac-sha512. Errors name
// the file and the line.
func LoadKeys(path string) (*Keys, error) { return nil, nil }

// ParseKeys is LoadKeys on the text of a key file; name is used in errors.
func ParseKeys(name string, text []byte) (*Keys, error) { return nil, nil }

// Secrets returns key name to secret, for dns.Server.TsigSecret,
// dns.Client.TsigSecret and dns.Transfer.TsigSecret. Nil when k is nil.
func (k *Keys) Secrets() map[string]string { return nil }

// Sign adds a TSIG record for the first (current) key to m; the client or
// server that writes m computes the MAC. Nothing when k is nil.
func (k *Keys) Sign(m *dns.Msg) {}

// Verified reports whether request r, served through w, is signed with one of
// the keys and its signature checked out (w.TsigStatus() == nil). It is true
// when k is nil (no keys, nothing required). For gslb's NOTIFY acceptance.
func (k *Keys) Verified(w dns.ResponseWriter, r *dns.Msg) bool { return false }
