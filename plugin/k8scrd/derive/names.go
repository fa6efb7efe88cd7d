package derive

import (
	"regexp"
	"slices"
	"strings"
	"sync"

	"github.com/fleetdns/fleetdns/plugin/k8scrd/object"

	"github.com/coredns/coredns/plugin"
	"github.com/miekg/dns"
	"golang.org/x/net/publicsuffix"
)

// k8s_gateway's naming conventions (README, "Moving from k8s_gateway";
// docs/replace-k8s-gateway.md). k8s_gateway, a CoreDNS plugin, serves the
// same kinds as the sources here but names them its own way:
//
//   - a Service's hosts come from the annotation coredns.io/hostname before
//     external-dns's (each a comma list, spaces removed, lower-cased);
//   - a LoadBalancer Service without either annotation is NAME.NAMESPACE
//     below every zone;
//   - a host is looked up both as written and relative to the zone, so a
//     host written without the zone ("myapp", "good.ok") answers below it.
//
// The words below turn each on. They are off by default where they differ
// from external-dns's conventions, which the sources follow; with a word
// off, a name k8s_gateway would have served is logged once per object and
// counted with a reason* below, so that nothing is dropped silently.

// The reasons a name that k8s_gateway would serve is not served here: the
// label of coredns_k8scrd_unserved_names_total and the reason of the
// not-served report, each with what to do about it (unservedHelp).
const (
	// ReasonK8sGatewayAnnotation: a host of the annotation coredns.io/hostname
	// while `hostname_annotation` does not name it.
	ReasonK8sGatewayAnnotation = "k8s_gateway_annotation"
	// reasonK8sGatewayServiceName: NAME.NAMESPACE.ZONE of a LoadBalancer
	// Service without a hostname annotation, without `service_names`.
	reasonK8sGatewayServiceName = "k8s_gateway_service_name"
	// reasonK8sGatewayRelative: a host written relative to the zone, without
	// `relative_hosts`.
	reasonK8sGatewayRelative = "k8s_gateway_relative_host"
	// ReasonK8sGatewayEndpoints: a Service annotated
	// k8s-gateway.dns/resolve-endpoints, whose pod addresses are not served.
	ReasonK8sGatewayEndpoints = "k8s_gateway_resolve_endpoints"
)

// UnservedHelp says, per reason, why the name is not served and what serves it.
var UnservedHelp = map[string]string{
	ReasonK8sGatewayAnnotation:  "k8s_gateway annotation " + object.AnnotationK8sGatewayHostname + "; enable with `hostname_annotation " + object.AnnotationK8sGatewayHostname + " " + object.AnnotationHostname + "`",
	reasonK8sGatewayServiceName: "k8s_gateway NAME.NAMESPACE name of a LoadBalancer Service; enable with `service_names`",
	reasonK8sGatewayRelative:    "k8s_gateway host relative to the zone; enable with `relative_hosts`",
	ReasonK8sGatewayEndpoints:   "k8s_gateway " + object.AnnotationK8sGatewayEndpoints + " (pod addresses) is not supported; publish a DNSEndpoint or a LoadBalancer Service",
}

// NameConventions are the naming words of a block: `hostname_annotation`,
// `service_names` and `relative_hosts`.
type NameConventions struct {
	// Annotations are the Service annotations read for hosts, the first
	// present one wins; empty: external-dns's alone.
	Annotations []string
	// ServiceNames: a LoadBalancer Service without a hostname annotation is
	// NAME.NAMESPACE below every zone.
	ServiceNames bool
	// RelativeHosts: a host outside every zone, written without a
	// top-level domain, is taken relative to every zone.
	RelativeHosts bool
	// Unserved, when set, is told the unserved names of every object
	// derived (none: an empty list) in place of the log and the metric:
	// the seam through which a report (the lint) collects them.
	Unserved func(kind, namespace, name string, names []UnservedName)
}

// hostnameAnnotation returns the first annotation of the block's list that
// annotations hold, and its value.
func (n *NameConventions) hostnameAnnotation(annotations map[string]string) (key, value string, ok bool) {
	keys := n.Annotations
	if len(keys) == 0 {
		keys = []string{object.AnnotationHostname}
	}
	for _, k := range keys {
		if v, present := annotations[k]; present {
			return k, v, true
		}
	}
	return "", "", false
}

// splitHostnames splits a hostname annotation as external-dns and
// k8s_gateway both do: every space removed, then a comma list. Empty
// entries are dropped.
func splitHostnames(v string) []string {
	var out []string
	for h := range strings.SplitSeq(strings.ReplaceAll(v, " ", ""), ",") {
		if h = strings.TrimSpace(h); h != "" {
			out = append(out, h)
		}
	}
	return out
}

// hostNames are the names at which host (as an object writes it) is
// served in zones: itself when inside a zone; with `relative_hosts`, a
// relative host below every zone. relative reports a host that k8s_gateway
// would serve below the zones; bad says that such a host is not an RFC 1123
// host name, which k8s_gateway skips too.
func (n *NameConventions) hostNames(host string, zones []string) (names []string, relative, bad bool) {
	if name, ok := lbHostInZones(host, zones); ok {
		return []string{name}, false, false
	}
	h := strings.ToLower(strings.TrimSpace(host))
	if !looksRelative(h) {
		return nil, false, false
	}
	if !isK8sGatewayHost(h) {
		return nil, false, true
	}
	if !n.RelativeHosts {
		return nil, true, false
	}
	for _, z := range zones {
		name := dns.Fqdn(h + "." + strings.TrimSuffix(z, "."))
		if _, ok := dns.IsDomainName(name); ok && plugin.Zones(zones).Matches(name) != "" {
			names = append(names, name)
		}
	}
	return names, true, false
}

// relativeNames are the names k8s_gateway serves for a relative host:
// the host below every zone.
func relativeNames(host string, zones []string) []string {
	h := strings.ToLower(strings.TrimSpace(host))
	out := make([]string, 0, len(zones))
	for _, z := range zones {
		out = append(out, dns.Fqdn(h+"."+strings.TrimSuffix(z, ".")))
	}
	return out
}

// looksRelative reports whether host, outside every zone, is written
// relative to the zone rather than as a name of another domain: it has no
// trailing dot, and it is one label or does not end in a top-level domain,
// one of the public suffix list's ICANN section or a special-use one
// ("myapp", "shop", "test.default", "good.ok"; not "www.example.com", nor
// "api.dev", nor "www.outside.test"). k8s_gateway looks every host up both
// ways; only the relative reading is taken here, so that a host of another
// domain is never served below the zone (www.example.com.example.org), nor
// logged as unserved.
func looksRelative(host string) bool {
	if host == "" || strings.HasSuffix(host, ".") {
		return false
	}
	h := strings.TrimPrefix(host, "*.")
	i := strings.LastIndexByte(h, '.')
	if i < 0 {
		return true
	}
	if specialUseTLDs[h[i+1:]] {
		return false
	}
	_, icann := publicsuffix.PublicSuffix(h)
	return !icann
}

// specialUseTLDs are the top-level domains reserved for special use, which
// the public suffix list does not hold: RFC 6761 (test, example, invalid,
// localhost), RFC 6762 (local), RFC 7686 (onion), RFC 9476 (alt), and
// internal (ICANN's private-use domain).
var specialUseTLDs = map[string]bool{
	"test": true, "example": true, "invalid": true, "localhost": true,
	"local": true, "onion": true, "alt": true, "internal": true,
}

// k8sGatewayHost is the RFC 1123 host name k8s_gateway accepts in an
// annotation (after an optional "*."), as the Kubernetes API validates
// object names.
var k8sGatewayHost = regexp.MustCompile(`^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$`)

// isK8sGatewayHost reports whether k8s_gateway takes h (lower-case) as a host.
func isK8sGatewayHost(h string) bool {
	if _, ok := dns.IsDomainName(h); !ok {
		return false
	}
	return k8sGatewayHost.MatchString(strings.TrimPrefix(h, "*."))
}

// UnservedName is a name that k8s_gateway would serve for an object and
// this block does not, with the reason (a reason* constant).
type UnservedName struct {
	name   string
	reason string
}

// unservedNotes remembers, per block and object, what was last logged of
// its unserved names, so that each is logged once per change; bounded
// (maxUnservedNotes, forgotten all at once beyond it: an object is then
// logged again at its next change).
var unservedNotes = struct {
	sync.Mutex
	last map[string]string
}{last: map[string]string{}}

const maxUnservedNotes = 16384

// unservedMessage is how the not-served report (the lint, the NameSkipped
// Event, skipped.go) says u: the name, its reason, what k8s_gateway
// reads and what serves it here.
func unservedMessage(u UnservedName) string {
	return u.name + " (" + u.reason + "): " + UnservedHelp[u.reason]
}

// noteUnserved logs and counts the names of an object that k8s_gateway
// would serve and the block does not, once per distinct set. cfg's zones
// tell one block from another.
// With cfg.names.unserved set, it is handed the names instead (sorted,
// once each).
func noteUnserved(cfg *Options, kind, namespace, name string, names []UnservedName) {
	names = slices.Clone(names)
	slices.SortFunc(names, func(x, y UnservedName) int {
		return strings.Compare(x.name+" "+x.reason, y.name+" "+y.reason)
	})
	names = slices.Compact(names)
	if cfg.Names.Unserved != nil {
		cfg.Names.Unserved(kind, namespace, name, names)
		return
	}
	key := strings.Join(cfg.Zones, ",") + " " + SourceKey(kind, namespace, name)
	var b strings.Builder
	for i, u := range names {
		if i > 0 {
			b.WriteString("; ")
		}
		b.WriteString(u.name + " (" + UnservedHelp[u.reason] + ")")
	}
	msg := b.String()
	unservedNotes.Lock()
	if unservedNotes.last[key] == msg {
		unservedNotes.Unlock()
		return
	}
	if msg == "" {
		delete(unservedNotes.last, key)
		unservedNotes.Unlock()
		return
	}
	if len(unservedNotes.last) >= maxUnservedNotes {
		clear(unservedNotes.last)
	}
	unservedNotes.last[key] = msg
	unservedNotes.Unlock()
	for _, u := range names {
		unservedNames.WithLabelValues(u.reason).Inc()
	}
	log.Warningf("%s %s/%s: not served, as k8s_gateway would serve them: %s", kind, namespace, name, msg)
}
