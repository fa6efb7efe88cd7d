package testkit

import (
	"maps"
	"slices"
	"strconv"
	"strings"
)

// Endpoint is one entry of a DNSEndpoint's spec.endpoints, as external-dns
// defines it (sigs.k8s.io/external-dns/endpoint.Endpoint).
type Endpoint struct {
	DNSName          string
	RecordType       string
	Targets          []string
	TTL              int64             // recordTTL; 0 leaves it out
	SetIdentifier    string            // optional
	Labels           map[string]string // the endpoint's own labels (k8gb's strategy, weights)
	ProviderSpecific [][2]string       // name, value pairs, in order
}

// EP is the endpoint most tests need: a name, a type, a recordTTL (0: none)
// and its targets.
func EP(name, rtype string, ttl int64, targets ...string) Endpoint {
	return Endpoint{DNSName: name, RecordType: rtype, TTL: ttl, Targets: targets}
}

// DNSEndpoint renders one DNSEndpoint object as a YAML document, as a user
// would write it for kubectl or a k8scrd directory. Every string is quoted
// (strconv.Quote, which YAML's double-quoted style reads back), so any valid
// UTF-8 value arrives as given; maps are written in key order, so the text is
// the same on every run. An empty namespace is left out.
func DNSEndpoint(namespace, name string, labels map[string]string, eps ...Endpoint) string {
	var b strings.Builder
	b.WriteString("apiVersion: externaldns.k8s.io/v1alpha1\nkind: DNSEndpoint\nmetadata:\n")
	b.WriteString("  name: " + strconv.Quote(name) + "\n")
	if namespace != "" {
		b.WriteString("  namespace: " + strconv.Quote(namespace) + "\n")
	}
	writeMap(&b, "  ", "labels", labels)
	if len(eps) == 0 {
		b.WriteString("spec:\n  endpoints: []\n")
		return b.String()
	}
	b.WriteString("spec:\n  endpoints:\n")
	for _, e := range eps {
		e.write(&b)
	}
	return b.String()
}

func (e Endpoint) write(b *strings.Builder) {
	b.WriteString("  - dnsName: " + strconv.Quote(e.DNSName) + "\n")
	b.WriteString("    recordType: " + strconv.Quote(e.RecordType) + "\n")
	if e.TTL != 0 {
		b.WriteString("    recordTTL: " + strconv.FormatInt(e.TTL, 10) + "\n")
	}
	if e.SetIdentifier != "" {
		b.WriteString("    setIdentifier: " + strconv.Quote(e.SetIdentifier) + "\n")
	}
	if len(e.Targets) == 0 {
		b.WriteString("    targets: []\n")
	} else {
		b.WriteString("    targets:\n")
		for _, t := range e.Targets {
			b.WriteString("    - " + strconv.Quote(t) + "\n")
		}
	}
	writeMap(b, "    ", "labels", e.Labels)
	if len(e.ProviderSpecific) > 0 {
		b.WriteString("    providerSpecific:\n")
		for _, p := range e.ProviderSpecific {
			b.WriteString("    - name: " + strconv.Quote(p[0]) + "\n      value: " + strconv.Quote(p[1]) + "\n")
		}
	}
}

func writeMap(b *strings.Builder, indent, key string, m map[string]string) {
	if len(m) == 0 {
		return
	}
	b.WriteString(indent + key + ":\n")
	for _, k := range slices.Sorted(maps.Keys(m)) {
		b.WriteString(indent + "  " + strconv.Quote(k) + ": " + strconv.Quote(m[k]) + "\n")
	}
}

// Object is the endpoint as an unstructured object's field (the JSON shape
// that the API server stores), for clients that create objects directly.
func (e Endpoint) Object() map[string]any {
	targets := make([]any, len(e.Targets))
	for i, s := range e.Targets {
		targets[i] = s
	}
	m := map[string]any{"dnsName": e.DNSName, "recordType": e.RecordType, "targets": targets}
	if e.TTL != 0 {
		m["recordTTL"] = e.TTL
	}
	if e.SetIdentifier != "" {
		m["setIdentifier"] = e.SetIdentifier
	}
	if len(e.Labels) > 0 {
		l := make(map[string]any, len(e.Labels))
		for k, v := range e.Labels {
			l[k] = v
		}
		m["labels"] = l
	}
	if len(e.ProviderSpecific) > 0 {
		ps := make([]any, len(e.ProviderSpecific))
		for i, p := range e.ProviderSpecific {
			ps[i] = map[string]any{"name": p[0], "value": p[1]}
		}
		m["providerSpecific"] = ps
	}
	return m
}

// DNSEndpointObject is DNSEndpoint's object in the unstructured shape
// (apiVersion, kind, metadata, spec), the same content as the YAML.
func DNSEndpointObject(namespace, name string, labels map[string]string, eps ...Endpoint) map[string]any {
	meta := map[string]any{"name": name}
	if namespace != "" {
		meta["namespace"] = namespace
	}
	if len(labels) > 0 {
		l := make(map[string]any, len(labels))
		for k, v := range labels {
			l[k] = v
		}
		meta["labels"] = l
	}
	list := make([]any, len(eps))
	for i, e := range eps {
		list[i] = e.Object()
	}
	return map[string]any{
		"apiVersion": "externaldns.k8s.io/v1alpha1", "kind": "DNSEndpoint",
		"metadata": meta, "spec": map[string]any{"endpoints": list},
	}
}
