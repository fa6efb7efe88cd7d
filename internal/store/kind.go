package store

import "strings"

// Kind is what a name the store declares is to the plugins that read it.
// Every plugin classifies a host here, so that localtargets, its health
// checks and gslb agree on what a GSLB host is.
type Kind int

const (
	// ZoneData is served by k8scrd as it is: no A or AAAA endpoint is
	// declared at the name (a CNAME, TXT, MX ...).
	ZoneData Kind = iota
	// Address is a host whose address targets localtargets offers to peers
	// and gslb assembles (inside a gslb zone) under the host's strategy.
	Address
	// Verbatim was written by the k8gb operator: it holds an assembled
	// answer and is served as written, never re-assembled or offered as
	// this cluster's own targets.
	Verbatim
	// LocalTargets is a literal localtargets-<host> record in the store:
	// served as written (k8gb's operator writes them).
	LocalTargets
)

func (k Kind) String() string {
	switch k {
	case Address:
		return "address"
	case Verbatim:
		return "verbatim"
	case LocalTargets:
		return "localtargets"
	}
	return "zonedata"
}

// Classify returns what h is, with prefix the localtargets- prefix of the
// block.
func Classify(h *Host, prefix string) Kind {
	switch {
	case IsLocalTargets(h.Name, prefix):
		return LocalTargets
	case h.Verbatim:
		return Verbatim
	case h.AddressDeclared:
		return Address
	}
	return ZoneData
}

// IsLocalTargets reports whether name (lower-case) is a localtargets- name:
// its first label starts with prefix and something follows it.
func IsLocalTargets(name, prefix string) bool {
	_, ok := TargetHost(name, prefix)
	return ok
}

// TargetHost returns the host that the localtargets- name asks about:
// "localtargets-app.example.com." gives "app.example.com.". ok is false when
// name does not start with prefix or nothing but a label boundary follows it.
func TargetHost(name, prefix string) (host string, ok bool) {
	if prefix == "" || !strings.HasPrefix(name, prefix) {
		return "", false
	}
	host = name[len(prefix):]
	if host == "" || host[0] == '.' {
		return "", false
	}
	return host, true
}
