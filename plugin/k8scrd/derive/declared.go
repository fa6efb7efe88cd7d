package derive

import (
	"net/netip"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/fleetdns/fleetdns/plugin/k8scrd/object"

	"sigs.k8s.io/external-dns/endpoint"
	gatewayv1 "sigs.k8s.io/gateway-api/apis/v1"
)

// Options are what a derivation reads of the block: its zones, the
// classes it serves and k8s_gateway's naming words.
type Options struct {
	Zones []string
	// IngressClasses and gatewayClasses filter Ingresses and routes by class
	// (`ingress_class`, `gateway_class`); empty: every class.
	IngressClasses []string
	GatewayClasses []string
	// Names are k8s_gateway's naming conventions (names.go).
	Names NameConventions
}

// Dependency keys: what a derivation read, so that a change to it derives
// the object again. A Service ("namespace/name"), a Gateway, a Gslb's
// referenced object ("kind:namespace/name"), or every object of a kind in
// a namespace (a Gslb's label selector, "kind:namespace").
const (
	DepService = "svc:"
	DepGateway = "gw:"
	DepRef     = "ref:"
	DepRefNS   = "refns:"
)

// Declared is what one of the cluster's objects (an Ingress, a Service, a
// route) declares: its hosts inside the zones with their health, the
// targets its status gives, and its GSLB policy. The derive functions
// compute it from the object and the world around it; object turns it into
// the builder's object, so that every plugin reads it through the one store.
type Declared struct {
	Kind, Namespace, Name, UID string
	Created, Changed           time.Time
	labels                     map[string]string

	// Hosts are the names inside the zones, lower-case and fully qualified
	// ("*.shop.example.org." for a wildcard), sorted and unique.
	Hosts []DeclaredHost
	// Addrs are the status addresses (IPv4 and IPv6), sorted and unique;
	// hostnames the status host names (lower-case, fully qualified, sorted,
	// unique), which the resolver turns into addresses.
	Addrs     []netip.Addr
	Hostnames []string
	// AnnotatedHostnames: hostnames come from an annotation (k8gb.io/exposed-hostnames), not a controller's status.
	AnnotatedHostnames bool
	// props is the GSLB policy: the gslb.fleetdns.io/* annotations as
	// gslb/* properties, sorted by name.
	props endpoint.ProviderSpecific
	// ttl is the records' TTL from annotationTTL; ttlSet false: the block's default.
	ttl    uint32
	ttlSet bool

	// Services and gateways are what the derivation read ("namespace/name"):
	// a change to one of them derives the object again.
	Services []string
	Gateways []string
	// Bad says what of the object cannot be served (an address that does
	// not parse, an annotation out of range): logged once, counted, the rest served.
	Bad []string
}

// DeclaredHost is one host of a declared object.
type DeclaredHost struct {
	Name string
	// Ready: a Service behind this host has a ready endpoint. Unready hosts
	// keep their declaration; their targets leave localtargets- and gslb answers.
	Ready bool
	// own, when set, are the host's targets in place of the object's: a
	// route's host admitted by only some of the Gateways it is on.
	own *hostTargets
}

// hostTargets are the status addresses (sorted, unique) and status host
// names (sorted, unique) one host is served with.
type hostTargets struct {
	addrs     []netip.Addr
	hostnames []string
}

// World is what a derivation reads besides the object itself: the informers'
// caches, or the objects of the directory. Implementations are safe for
// concurrent use.
type World interface {
	// Ready reports whether Service namespace/name has a ready endpoint: an
	// EndpointSlice labelled kubernetes.io/service-name=name in namespace
	// with an endpoint whose conditions.ready is true or unset and whose
	// conditions.terminating is not true.
	Ready(namespace, name string) bool
	// DefaultIngressClass is the IngressClass annotated
	// ingressclass.kubernetes.io/is-default-class=true ("" when none; the
	// newest when several, as the API server's admission picks).
	DefaultIngressClass() string
	// Gateway returns Gateway namespace/name, nil when there is none.
	Gateway(namespace, name string) *gatewayv1.Gateway
}

// SourceKey keys a derived object in the builder: kinds never collide
// with each other or with DNSEndpoints ("namespace/name").
func SourceKey(kind, namespace, name string) string {
	return kind + ":" + namespace + "/" + name
}

// gslbProps turns an object's gslb.fleetdns.io/* annotations into the
// gslb/* properties a DNSEndpoint would carry, sorted by name.
func gslbProps(annotations map[string]string) endpoint.ProviderSpecific {
	var props endpoint.ProviderSpecific
	for k, v := range annotations {
		if rest, ok := strings.CutPrefix(k, object.GslbAnnotations); ok && rest != "" {
			props = append(props, endpoint.ProviderSpecificProperty{Name: "gslb/" + rest, Value: v})
		}
	}
	slices.SortFunc(props, func(x, y endpoint.ProviderSpecificProperty) int { return strings.Compare(x.Name, y.Name) })
	return props
}

// annotatedTTL reads annotationTTL: seconds, 0 to maxTTL. ok is false when
// the annotation is absent; err names what is wrong with a present one.
func annotatedTTL(annotations map[string]string) (ttl uint32, ok bool, bad string) {
	v, present := annotations[object.AnnotationTTL]
	if !present {
		return 0, false, ""
	}
	n, err := strconv.ParseUint(strings.TrimSpace(v), 10, 32)
	if err != nil || n > object.MaxTTL {
		return 0, false, "annotation " + object.AnnotationTTL + "=" + strconv.Quote(v) + ": want seconds, 0 to " + strconv.Itoa(object.MaxTTL) + "; the default TTL is used"
	}
	return uint32(n), true, ""
}

// Object converts d into the builder's object: at every host an A endpoint
// (declared even while the load balancer is pending, so that the host
// answers NODATA rather than NXDOMAIN) and an AAAA endpoint when there are
// IPv6 targets, with the status addresses and those resolved of the status
// host names (resolved may be nil). Unready hosts' endpoints are marked so.
func (d *Declared) Object(resolved func(hostname string) []netip.Addr, zones []string, defaultTTL uint32) (*object.Object, []object.Invalid) {
	v4, v6 := targets(d.Addrs, d.Hostnames, resolved)
	var ttl endpoint.TTL
	if d.ttlSet {
		ttl = endpoint.TTL(d.ttl)
	}
	eps := make([]*endpoint.Endpoint, 0, 2*len(d.Hosts))
	for _, h := range d.Hosts {
		v4, v6 := v4, v6
		if h.own != nil {
			v4, v6 = targets(h.own.addrs, h.own.hostnames, resolved)
		}
		eps = append(eps, &endpoint.Endpoint{DNSName: h.Name, RecordType: "A", Targets: v4, RecordTTL: ttl, ProviderSpecific: d.props})
		if len(v6) > 0 {
			eps = append(eps, &endpoint.Endpoint{DNSName: h.Name, RecordType: "AAAA", Targets: v6, RecordTTL: ttl, ProviderSpecific: d.props})
		}
	}
	o, bad := object.New(object.Meta{
		Key: SourceKey(d.Kind, d.Namespace, d.Name), Namespace: d.Namespace, Name: d.Name, UID: d.UID,
		Created: d.Created, Changed: d.Changed, Labels: d.labels,
	}, eps, zones, defaultTTL)
	o.Kind = d.Kind
	o.Verbatim = false // k8gb's labels mark its operator's DNSEndpoints, never these objects
	for i := range o.Endpoints {
		e := &o.Endpoints[i]
		j, ok := slices.BinarySearchFunc(d.Hosts, e.Name, func(h DeclaredHost, name string) int { return strings.Compare(h.Name, name) })
		if !ok || d.Hosts[j].Ready {
			continue
		}
		if e.Extra == nil {
			e.Extra = &object.EndpointExtra{}
		} else {
			x := *e.Extra
			e.Extra = &x
		}
		e.Extra.Unready = true
	}
	return o, bad
}

// targets returns addrs and the addresses resolved of hostnames (resolved
// may be nil) as the targets of A and AAAA endpoints, sorted and unique.
func targets(addrs []netip.Addr, hostnames []string, resolved func(hostname string) []netip.Addr) (v4, v6 []string) {
	addrs = slices.Clone(addrs)
	if resolved != nil {
		for _, h := range hostnames {
			addrs = append(addrs, resolved(h)...)
		}
	}
	for _, a := range addrs {
		if a.Is4() || a.Is4In6() {
			v4 = append(v4, a.Unmap().String())
		} else {
			v6 = append(v6, a.String())
		}
	}
	slices.Sort(v4)
	v4 = slices.Compact(v4)
	slices.Sort(v6)
	v6 = slices.Compact(v6)
	return v4, v6
}
