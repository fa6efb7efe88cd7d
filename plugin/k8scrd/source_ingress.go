package k8scrd

import (
	"maps"
	"net/netip"
	"slices"
	"strconv"
	"strings"

	"github.com/coredns/coredns/plugin"
	"github.com/miekg/dns"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// ingressClass is the class of ing: its ingressClassName, else the legacy
// kubernetes.io/ingress.class annotation, else defaultClass (the default
// IngressClass; "" when there is none).
func ingressClass(ing *networkingv1.Ingress, defaultClass string) string {
	if c := ing.Spec.IngressClassName; c != nil && *c != "" {
		return *c
	}
	if c := ing.Annotations[annotationIngressClass]; c != "" {
		return c
	}
	return defaultClass
}

// deriveIngress derives what an Ingress declares: the hosts of its rules and
// of its TLS section that lie inside the zones, the addresses and host names
// of its load balancer's status, and per host whether a backend Service of
// that host has a ready endpoint. nil: the Ingress declares nothing (its
// class is not served, or no host lies inside the zones).
//
// A rule host's Services are the service backends of its rules' paths;
// without any (only resource backends, or no paths) the default backend's.
// A host only in spec.tls[].hosts is routed to the default backend, so it
// takes its health from it, and without a default backend it is not served.
func deriveIngress(ing *networkingv1.Ingress, cfg *options, w world) *declared {
	if ing == nil {
		return nil
	}
	if len(cfg.ingressClasses) > 0 {
		// An Ingress without any class is in no list.
		if !slices.Contains(cfg.ingressClasses, ingressClass(ing, w.defaultIngressClass())) {
			return nil
		}
	}
	var def []string // the default backend's Service, if it has one
	if b := ing.Spec.DefaultBackend; b != nil && b.Service != nil && b.Service.Name != "" {
		def = []string{b.Service.Name}
	}

	// Each host's backend Services, in the order the rules give them.
	backends := map[string][]string{}
	var order []string
	var unserved []unservedName // what k8s_gateway would serve and the block does not
	defer func() { noteUnserved(cfg, kindIngress, ing.Namespace, ing.Name, unserved) }()
	for _, r := range ing.Spec.Rules {
		// An empty host is every host, not a name; a host outside the
		// zones is not served, unless `relative_hosts` takes it below them.
		names, relative, _ := cfg.names.hostNames(r.Host, cfg.zones)
		if relative && !cfg.names.relativeHosts {
			for _, n := range relativeNames(r.Host, cfg.zones) {
				unserved = append(unserved, unservedName{n, reasonK8sGatewayRelative})
			}
		}
		for _, name := range names {
			svcs, seen := backends[name]
			if !seen {
				order = append(order, name)
				svcs = []string{} // a rule host: served even without Services
			}
			if r.HTTP != nil {
				for _, p := range r.HTTP.Paths {
					if s := p.Backend.Service; s != nil && s.Name != "" {
						svcs = append(svcs, s.Name)
					}
				}
			}
			backends[name] = svcs
		}
	}
	for name, svcs := range backends {
		if len(svcs) == 0 {
			backends[name] = def
		}
	}
	for _, t := range ing.Spec.TLS {
		for _, h := range t.Hosts {
			names, _, _ := cfg.names.hostNames(h, cfg.zones)
			for _, name := range names {
				if _, seen := backends[name]; seen || ing.Spec.DefaultBackend == nil {
					continue // a rule's host takes its rule's health; without a default backend nothing serves it
				}
				backends[name] = def
				order = append(order, name)
			}
		}
	}
	if len(order) == 0 {
		return nil
	}

	d := lbDeclared(kindIngress, &ing.ObjectMeta)
	ready := map[string]bool{} // Service name -> has a ready endpoint, asked once
	for _, name := range order {
		h := declaredHost{name: name}
		for _, s := range backends[name] {
			r, asked := ready[s]
			if !asked {
				r = w.ready(ing.Namespace, s)
				ready[s] = r
			}
			h.ready = h.ready || r
		}
		d.hosts = append(d.hosts, h)
	}
	d.hosts = lbSortHosts(d.hosts)
	for s := range ready {
		d.services = append(d.services, ing.Namespace+"/"+s)
	}
	slices.Sort(d.services)
	for i, lb := range ing.Status.LoadBalancer.Ingress {
		lbAddTarget(d, i, lb.IP, lb.Hostname)
	}
	lbSortTargets(d)
	return d
}

// lbDeclared starts the declaration of an object with a load balancer
// status from its metadata: identity, times, labels, GSLB policy and TTL.
// The change time is the newest managedFields entry, else the creation, as
// transform has it for DNSEndpoints.
func lbDeclared(kind string, m *metav1.ObjectMeta) *declared {
	changed := m.CreationTimestamp.Time
	for _, mf := range m.ManagedFields {
		if mf.Time != nil && mf.Time.After(changed) {
			changed = mf.Time.Time
		}
	}
	d := &declared{
		kind: kind, namespace: m.Namespace, name: m.Name, uid: string(m.UID),
		created: m.CreationTimestamp.Time, changed: changed,
		labels: maps.Clone(m.Labels),
		props:  gslbProps(m.Annotations),
	}
	ttl, ok, bad := annotatedTTL(m.Annotations)
	d.ttl, d.ttlSet = ttl, ok
	if bad != "" {
		d.bad = append(d.bad, bad)
	}
	return d
}

// lbHostInZones normalizes a host of an object (lower-case, fully
// qualified) and reports whether it lies inside the zones. An empty host
// is no name. A wildcard host stays a wildcard name.
func lbHostInZones(host string, zones []string) (string, bool) {
	host = strings.TrimSpace(host)
	if host == "" || host == "." {
		return "", false
	}
	name := strings.ToLower(dns.Fqdn(host))
	if plugin.Zones(zones).Matches(name) == "" {
		return "", false
	}
	return name, true
}

// lbSortHosts sorts hosts by name and merges duplicates: a host is ready
// when any of its declarations is.
func lbSortHosts(hosts []declaredHost) []declaredHost {
	slices.SortStableFunc(hosts, func(x, y declaredHost) int { return strings.Compare(x.name, y.name) })
	out := hosts[:0]
	for _, h := range hosts {
		if n := len(out); n > 0 && out[n-1].name == h.name {
			out[n-1].ready = out[n-1].ready || h.ready
			continue
		}
		out = append(out, h)
	}
	return slices.Clip(out)
}

// lbAddTarget adds entry i of a status.loadBalancer.ingress list: its
// address to d.addrs and its host name to d.hostnames. What does not parse
// is named in d.bad, and the other targets are served.
func lbAddTarget(d *declared, i int, ip, hostname string) {
	field := "status.loadBalancer.ingress[" + strconv.Itoa(i) + "]"
	if ip != "" {
		a, err := netip.ParseAddr(strings.TrimSpace(ip))
		if err != nil || a.Zone() != "" {
			d.bad = append(d.bad, field+".ip "+strconv.Quote(ip)+": not an IP address")
		} else {
			d.addrs = append(d.addrs, a.Unmap())
		}
	}
	if hostname != "" {
		h := strings.ToLower(dns.Fqdn(strings.TrimSpace(hostname)))
		if _, ok := dns.IsDomainName(h); !ok || h == "." || strings.ContainsAny(h, " \t\"*") {
			d.bad = append(d.bad, field+".hostname "+strconv.Quote(hostname)+": not a host name")
		} else {
			d.hostnames = append(d.hostnames, h)
		}
	}
}

// lbSortTargets makes d's addresses and host names sorted and unique.
func lbSortTargets(d *declared) {
	slices.SortFunc(d.addrs, netip.Addr.Compare)
	d.addrs = slices.Compact(d.addrs)
	slices.Sort(d.hostnames)
	d.hostnames = slices.Compact(d.hostnames)
}
