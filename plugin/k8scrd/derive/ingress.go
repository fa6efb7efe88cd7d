package derive

import (
	"maps"
	"net/netip"
	"slices"
	"strconv"
	"strings"

	"github.com/fleetdns/fleetdns/plugin/k8scrd/object"

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
	if c := ing.Annotations[object.AnnotationIngressClass]; c != "" {
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
func deriveIngress(ing *networkingv1.Ingress, cfg *Options, w World) *Declared {
	if ing == nil {
		return nil
	}
	if len(cfg.IngressClasses) > 0 {
		// An Ingress without any class is in no list.
		if !slices.Contains(cfg.IngressClasses, ingressClass(ing, w.DefaultIngressClass())) {
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
	var unserved []UnservedName // what k8s_gateway would serve and the block does not
	defer func() { noteUnserved(cfg, object.KindIngress, ing.Namespace, ing.Name, unserved) }()
	for _, r := range ing.Spec.Rules {
		// An empty host is every host, not a name; a host outside the
		// zones is not served, unless `relative_hosts` takes it below them.
		names, relative, _ := cfg.Names.hostNames(r.Host, cfg.Zones)
		if relative && !cfg.Names.RelativeHosts {
			for _, n := range relativeNames(r.Host, cfg.Zones) {
				unserved = append(unserved, UnservedName{n, reasonK8sGatewayRelative})
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
			names, _, _ := cfg.Names.hostNames(h, cfg.Zones)
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

	d := lbDeclared(object.KindIngress, &ing.ObjectMeta)
	ready := map[string]bool{} // Service name -> has a ready endpoint, asked once
	for _, name := range order {
		h := DeclaredHost{Name: name}
		for _, s := range backends[name] {
			r, asked := ready[s]
			if !asked {
				r = w.Ready(ing.Namespace, s)
				ready[s] = r
			}
			h.Ready = h.Ready || r
		}
		d.Hosts = append(d.Hosts, h)
	}
	d.Hosts = lbSortHosts(d.Hosts)
	for s := range ready {
		d.Services = append(d.Services, ing.Namespace+"/"+s)
	}
	slices.Sort(d.Services)
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
func lbDeclared(kind string, m *metav1.ObjectMeta) *Declared {
	changed := m.CreationTimestamp.Time
	for _, mf := range m.ManagedFields {
		if mf.Time != nil && mf.Time.After(changed) {
			changed = mf.Time.Time
		}
	}
	d := &Declared{
		Kind: kind, Namespace: m.Namespace, Name: m.Name, UID: string(m.UID),
		Created: m.CreationTimestamp.Time, Changed: changed,
		labels: maps.Clone(m.Labels),
		props:  gslbProps(m.Annotations),
	}
	ttl, ok, bad := annotatedTTL(m.Annotations)
	d.ttl, d.ttlSet = ttl, ok
	if bad != "" {
		d.Bad = append(d.Bad, bad)
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
func lbSortHosts(hosts []DeclaredHost) []DeclaredHost {
	slices.SortStableFunc(hosts, func(x, y DeclaredHost) int { return strings.Compare(x.Name, y.Name) })
	out := hosts[:0]
	for _, h := range hosts {
		if n := len(out); n > 0 && out[n-1].Name == h.Name {
			out[n-1].Ready = out[n-1].Ready || h.Ready
			continue
		}
		out = append(out, h)
	}
	return slices.Clip(out)
}

// lbAddTarget adds entry i of a status.loadBalancer.ingress list: its
// address to d.addrs and its host name to d.hostnames. What does not parse
// is named in d.bad, and the other targets are served.
func lbAddTarget(d *Declared, i int, ip, hostname string) {
	field := "status.loadBalancer.ingress[" + strconv.Itoa(i) + "]"
	if ip != "" {
		a, err := netip.ParseAddr(strings.TrimSpace(ip))
		if err != nil || a.Zone() != "" {
			d.Bad = append(d.Bad, field+".ip "+strconv.Quote(ip)+": not an IP address")
		} else {
			d.Addrs = append(d.Addrs, a.Unmap())
		}
	}
	if hostname != "" {
		h := strings.ToLower(dns.Fqdn(strings.TrimSpace(hostname)))
		if _, ok := dns.IsDomainName(h); !ok || h == "." || strings.ContainsAny(h, " \t\"*") {
			d.Bad = append(d.Bad, field+".hostname "+strconv.Quote(hostname)+": not a host name")
		} else {
			d.Hostnames = append(d.Hostnames, h)
		}
	}
}

// lbSortTargets makes d's addresses and host names sorted and unique.
func lbSortTargets(d *Declared) {
	slices.SortFunc(d.Addrs, netip.Addr.Compare)
	d.Addrs = slices.Compact(d.Addrs)
	slices.Sort(d.Hostnames)
	d.Hostnames = slices.Compact(d.Hostnames)
}
