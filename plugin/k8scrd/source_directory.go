package k8scrd

import (
	"encoding/json"
	"fmt"
	"path/filepath"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/labels"

	"github.com/fleetdns/fleetdns/plugin/k8scrd/object"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	networkingv1 "k8s.io/api/networking/v1"
	gatewayv1 "sigs.k8s.io/gateway-api/apis/v1"
)

// The cluster's own kinds in the directory: the same derivations as the
// API source (source_kube.go, cluster.sync), over the objects of the
// folder's files instead of the informers' caches.

// fileKind is how the directory reads one kind: the apiVersion it takes,
// and the kinds of `resources` that need it (it is skipped, silently,
// when none of them is served).
type fileKind struct {
	apiVersion string
	neededBy   []string
}

var routeKinds = []string{kindHTTPRoute, kindGRPCRoute, kindTLSRoute}

// fileKinds are the kinds the directory reads besides DNSEndpoint.
// A Gslb (k8gb.io/v1beta1, or the legacy k8gb.absa.oss/v1beta1) needs
// every kind it may name; those are then read for it, and served as
// sources of their own only when `resources` lists them.
var fileKinds = map[string]fileKind{
	kindIngress:       {"networking.k8s.io/v1", []string{kindIngress, kindGslb}},
	kindService:       {"v1", []string{kindService, kindGslb}},
	kindHTTPRoute:     {gatewayv1.GroupVersion.String(), []string{kindHTTPRoute, kindGslb}},
	kindGRPCRoute:     {gatewayv1.GroupVersion.String(), []string{kindGRPCRoute, kindGslb}},
	kindTLSRoute:      {gatewayv1.GroupVersion.String(), []string{kindTLSRoute, kindGslb}},
	kindTCPRoute:      {gatewayv1.GroupVersion.String(), []string{kindGslb}},
	kindUDPRoute:      {gatewayv1.GroupVersion.String(), []string{kindGslb}},
	kindEndpointSlice: {"discovery.k8s.io/v1", append([]string{kindIngress, kindService, kindGslb}, routeKinds...)},
	kindIngressClass:  {"networking.k8s.io/v1", []string{kindIngress}},
	kindGateway:       {gatewayv1.GroupVersion.String(), append([]string{kindGslb}, routeKinds...)},
	kindGslb:          {gslbGroup + "/" + gslbVersion, []string{kindGslb}},
}

// acceptedKinds lists, for messages, every kind a manifest file may hold.
var acceptedKinds = strings.Join(append(slices.Clone(kinds), kindTCPRoute, kindUDPRoute, kindEndpointSlice, kindIngressClass, kindGateway), ", ") + ", or a List of them"

// dirConfig is what the folder feed reads of the block.
type dirConfig struct {
	options
	directory string
	// namespaces and selector select the objects served (empty, nil: all).
	namespaces []string
	selector   labels.Selector
	resources  []string
	ttl        uint32
}

// serves reports whether kind is among the resources served.
func (cfg *dirConfig) serves(kind string) bool { return slices.Contains(cfg.resources, kind) }

// selects reports whether an object in namespace ns with these labels is
// served: the folder's equivalent of the API's namespace and label selector.
func (cfg *dirConfig) selects(ns string, l map[string]string) bool {
	if len(cfg.namespaces) > 0 && !slices.Contains(cfg.namespaces, ns) {
		return false
	}
	return cfg.selector == nil || cfg.selector.Matches(labels.Set(l))
}

// reads reports whether the directory reads documents of kind, given the
// kinds served; known is false for a kind it never reads.
func (cfg *dirConfig) reads(kind string) (read, known bool) {
	if kind == kindDNSEndpoint {
		return cfg.serves(kind), true
	}
	fk, ok := fileKinds[kind]
	if !ok {
		return false, false
	}
	return slices.ContainsFunc(fk.neededBy, cfg.serves), true
}

// derives reports whether any kind served is derived (not a DNSEndpoint).
func (cfg *dirConfig) derives() bool {
	return slices.ContainsFunc(cfg.resources, func(k string) bool { return k != kindDNSEndpoint })
}

// fileSource is one object of a file that k8scrd derives: an Ingress, a
// Service or a route, decoded.
type fileSource struct {
	key                   string // "file:BASE#" + sourceKey(kind, namespace, name), unique in the file
	kind, namespace, name string
	line                  int
	obj                   any // *networkingv1.Ingress, *corev1.Service, *gatewayv1.HTTPRoute, ...
}

// derive runs the API source's derivation of the object. An object of a
// kind read only for the Gslbs that name it declares nothing of its own.
func (s *fileSource) derive(cfg *dirConfig, w *dirWorld) *declared {
	if !cfg.serves(s.kind) && !isGslbKind(s.kind) {
		return nil
	}
	if g, ok := s.obj.(*gslbObject); ok {
		d, out := deriveGslb(g, s.kind, &cfg.options, w)
		if out.note != "" {
			w.noted = append(w.noted, s.key+"\x00"+out.note)
		}
		return d
	}
	d, _ := derive(s.kind, s.obj, &cfg.options, w)
	return d
}

// fileSlice is what the directory keeps of an EndpointSlice, as the
// informers' cache does (readySlice).
type fileSlice struct {
	namespace, service string
	ready              bool
}

// parsedFile is what one manifest file holds.
type parsedFile struct {
	docs     []manifestDoc // DNSEndpoints
	sources  []fileSource  // derived kinds
	slices   []fileSlice
	classes  []*networkingv1.IngressClass
	gateways []*gatewayv1.Gateway
	// problems are every document that was left out, in file order (the
	// lint reports them all; the feed logs the first).
	problems []fileProblem
}

// fileProblem is a document of a manifest file left out: one that does not
// parse, or (unknownKind) of a kind the directory never reads.
type fileProblem struct {
	line        int
	msg         string
	kind        string
	unknownKind bool
}

// addKind decodes one document (or List item) of a kind other than
// DNSEndpoint that the directory reads. The namespaces and labels filter
// the derived kinds as they filter DNSEndpoints; EndpointSlices and
// Gateways are read in the namespaces served (whatever their labels), and
// IngressClasses (cluster-wide) always, as the informers read them.
func (p *parsedFile) addKind(cfg *dirConfig, path string, line int, kind string, item []byte, seen map[string]int) error {
	var obj any
	switch kind {
	case kindIngress:
		obj = &networkingv1.Ingress{}
	case kindService:
		obj = &corev1.Service{}
	case kindHTTPRoute:
		obj = &gatewayv1.HTTPRoute{}
	case kindGRPCRoute:
		obj = &gatewayv1.GRPCRoute{}
	case kindTLSRoute:
		obj = &gatewayv1.TLSRoute{}
	case kindTCPRoute:
		obj = &gatewayv1.TCPRoute{}
	case kindUDPRoute:
		obj = &gatewayv1.UDPRoute{}
	case kindGslb:
		obj = &gslbObject{}
	case kindEndpointSlice:
		obj = &discoveryv1.EndpointSlice{}
	case kindIngressClass:
		obj = &networkingv1.IngressClass{}
	case kindGateway:
		obj = &gatewayv1.Gateway{}
	default:
		return fmt.Errorf("kind %q is not one the directory reads", kind)
	}
	if err := json.Unmarshal(item, obj); err != nil {
		return fmt.Errorf("%s: %v", kind, err)
	}
	switch o := obj.(type) {
	case *networkingv1.IngressClass:
		p.classes = append(p.classes, o)
		return nil
	case *discoveryv1.EndpointSlice:
		if o.Namespace == "" {
			o.Namespace = "default"
		}
		if len(cfg.namespaces) == 0 || slices.Contains(cfg.namespaces, o.Namespace) {
			p.slices = append(p.slices, fileSlice{namespace: o.Namespace, service: o.Labels[labelServiceName], ready: sliceReady(o)})
		}
		return nil
	case *gatewayv1.Gateway:
		if o.Namespace == "" {
			o.Namespace = "default"
		}
		if len(cfg.namespaces) == 0 || slices.Contains(cfg.namespaces, o.Namespace) {
			p.gateways = append(p.gateways, o)
		}
		return nil
	}
	// A derived kind: the derivations read the namespace from the object
	// (a route's parents default to it), so it is set there.
	var m *metaFields
	switch o := obj.(type) {
	case *networkingv1.Ingress:
		m = &metaFields{&o.Namespace, o.Name, o.Labels}
	case *corev1.Service:
		m = &metaFields{&o.Namespace, o.Name, o.Labels}
	case *gatewayv1.HTTPRoute:
		m = &metaFields{&o.Namespace, o.Name, o.Labels}
	case *gatewayv1.GRPCRoute:
		m = &metaFields{&o.Namespace, o.Name, o.Labels}
	case *gatewayv1.TLSRoute:
		m = &metaFields{&o.Namespace, o.Name, o.Labels}
	case *gatewayv1.TCPRoute:
		m = &metaFields{&o.Namespace, o.Name, o.Labels}
	case *gatewayv1.UDPRoute:
		m = &metaFields{&o.Namespace, o.Name, o.Labels}
	case *gslbObject:
		m = &metaFields{&o.Namespace, o.Name, o.Labels}
		if o.APIVersion == gslbLegacyGroup+"/"+gslbVersion {
			kind = kindGslbLegacy
		}
	}
	if *m.namespace == "" {
		*m.namespace = "default"
	}
	ns := *m.namespace
	if !cfg.selects(ns, m.labels) {
		return nil
	}
	sk := sourceKey(kind, ns, m.name)
	key := "file:" + filepath.Base(path) + "#" + sk
	if n := seen[sk]; n > 0 {
		key += "#" + strconv.Itoa(n+1)
	}
	seen[sk]++
	p.sources = append(p.sources, fileSource{key: key, kind: kind, namespace: ns, name: m.name, line: line, obj: obj})
	return nil
}

type metaFields struct {
	namespace *string
	name      string
	labels    map[string]string
}

// dirWorld is the world of the directory's derivations: the EndpointSlices,
// IngressClasses and Gateways of every file of the folder.
type dirWorld struct {
	readyBy      map[string]bool // "namespace/service" -> a slice of it has a ready endpoint
	defaultClass string
	gateways     map[string]*gatewayv1.Gateway // "namespace/name"; the first file (by name) wins
	// objs are the derived kinds' objects, for the Gslbs that name them
	// ("Kind/namespace/name"; the first file wins).
	objs  map[string]any
	noted []string // the Gslb notes of this derivation (source key + note)
}

func newDirWorld(files map[string]*manifestFile) *dirWorld {
	w := &dirWorld{readyBy: map[string]bool{}, gateways: map[string]*gatewayv1.Gateway{}, objs: map[string]any{}}
	var best *networkingv1.IngressClass
	for _, base := range sortedKeys(files) {
		f := files[base]
		for _, s := range f.sources {
			k := s.kind + "/" + s.namespace + "/" + s.name
			if _, ok := w.objs[k]; !ok {
				w.objs[k] = s.obj
			}
		}
		for _, s := range f.slices {
			if s.service == "" {
				continue
			}
			k := s.namespace + "/" + s.service
			w.readyBy[k] = w.readyBy[k] || s.ready
		}
		for _, g := range f.gateways {
			k := g.Namespace + "/" + g.Name
			if _, ok := w.gateways[k]; !ok {
				w.gateways[k] = g
			}
		}
		// The newest class marked default, as cluster.defaultIngressClass picks it.
		for _, ic := range f.classes {
			if ic.Annotations[annotationDefaultClass] != "true" {
				continue
			}
			if best == nil || ic.CreationTimestamp.After(best.CreationTimestamp.Time) ||
				ic.CreationTimestamp.Equal(&best.CreationTimestamp) && ic.Name < best.Name {
				best = ic
			}
		}
	}
	if best != nil {
		w.defaultClass = best.Name
	}
	return w
}

func (w *dirWorld) ready(namespace, name string) bool { return w.readyBy[namespace+"/"+name] }
func (w *dirWorld) defaultIngressClass() string       { return w.defaultClass }
func (w *dirWorld) gateway(namespace, name string) *gatewayv1.Gateway {
	return w.gateways[namespace+"/"+name]
}
func (w *dirWorld) object(kind, namespace, name string) any {
	return w.objs[kind+"/"+namespace+"/"+name]
}
func (w *dirWorld) objects(kind, namespace string) []any {
	var out []any
	for _, k := range sortedKeys(w.objs) {
		if strings.HasPrefix(k, kind+"/"+namespace+"/") {
			out = append(out, w.objs[k])
		}
	}
	return out
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}

// derivedFile is what the directory last handed the builder for one
// derived object.
type derivedFile struct {
	decl     *declared
	problems string // what was last logged of it
}

// derive derives every derived object of the folder again and hands the
// builder what changed: upserts for objects whose declaration changed,
// removals for those gone. Every object is derived again on any change,
// not only those that read what changed: a folder of manifests is small,
// and this keeps the directory free of the API source's dependency index.
// at is when the change happened (for the propagation delay metric).
func (d *directory) derive(at time.Time) {
	if d.derived == nil {
		d.derived = map[string]*derivedFile{}
	}
	w := newDirWorld(d.files)
	seen := map[string]bool{}
	for _, base := range sortedKeys(d.files) {
		f := d.files[base]
		for i := range f.sources {
			s := &f.sources[i]
			decl := s.derive(d.cfg, w)
			if decl == nil {
				continue
			}
			seen[s.key] = true
			old := d.derived[s.key]
			if old != nil && reflect.DeepEqual(old.decl, decl) {
				continue
			}
			// Status host names are not resolved: the directory has no
			// resolver (README), so only status addresses are targets.
			o, bad := decl.object(nil, d.cfg.zones, d.cfg.ttl)
			o.Key = s.key
			if o.Created.IsZero() {
				o.Created = f.mtime
			}
			o.Changed = f.mtime
			if at.After(o.Changed) {
				o.Changed = at
			}
			o.Version = uint64(max(o.Changed.Unix(), 0))
			problems := d.logBad(filepath.Join(d.dir, base), s, decl.bad, bad, old)
			d.derived[s.key] = &derivedFile{decl: decl, problems: problems}
			d.b.Upsert(o)
		}
	}
	for key := range d.derived {
		if !seen[key] {
			delete(d.derived, key)
			d.b.RemoveAt(key, uint64(max(at.Unix(), 0)))
		}
	}
	notes := map[string]bool{}
	for _, n := range w.noted {
		notes[n] = true
		if !d.notes[n] {
			key, note, _ := strings.Cut(n, "\x00")
			log.Warningf("%s: %s", key, note)
		}
	}
	d.notes = notes
}

// logBad logs what of a derived object cannot be served, in one line, and
// counts it, unless the same was logged for it last time.
func (d *directory) logBad(path string, s *fileSource, declBad []string, bad []object.Invalid, old *derivedFile) string {
	msgs := slices.Clone(declBad)
	for _, b := range bad {
		if b.Reason != object.ReasonZone {
			msgs = append(msgs, b.Msg)
		}
	}
	msg := strings.Join(msgs, "; ")
	if msg == "" || old != nil && old.problems == msg {
		return msg
	}
	object.InvalidEndpoints.WithLabelValues(object.ReasonSource).Add(float64(len(declBad)))
	for _, b := range bad {
		if b.Reason != object.ReasonZone {
			object.InvalidEndpoints.WithLabelValues(b.Reason).Inc()
		}
	}
	log.Warningf("%s:%d: %s %s/%s: %s; skipped, the rest of it is served", path, s.line, s.kind, s.namespace, s.name, msg)
	return msg
}
