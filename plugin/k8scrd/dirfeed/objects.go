package dirfeed

import (
	"encoding/json"
	"fmt"
	"path/filepath"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/fleetdns/fleetdns/plugin/k8scrd/derive"
	"github.com/fleetdns/fleetdns/plugin/k8scrd/object"

	"k8s.io/apimachinery/pkg/labels"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	networkingv1 "k8s.io/api/networking/v1"
	gatewayv1 "sigs.k8s.io/gateway-api/apis/v1"
)

// The cluster's own kinds in the directory: the same derivations as the
// API source (kubefeed/cluster.go, cluster.sync), over the objects of the
// folder's files instead of the informers' caches.

// fileKind is how the directory reads one kind: the apiVersion it takes,
// and the kinds of `resources` that need it (it is skipped, silently,
// when none of them is served).
type fileKind struct {
	apiVersion string
	neededBy   []string
}

var routeKinds = []string{object.KindHTTPRoute, object.KindGRPCRoute, object.KindTLSRoute}

// fileKinds are the kinds the directory reads besides DNSEndpoint.
// A Gslb (k8gb.io/v1beta1, or the legacy k8gb.absa.oss/v1beta1) needs
// every kind it may name; those are then read for it, and served as
// sources of their own only when `resources` lists them.
var fileKinds = map[string]fileKind{
	object.KindIngress:       {"networking.k8s.io/v1", []string{object.KindIngress, object.KindGslb}},
	object.KindService:       {"v1", []string{object.KindService, object.KindGslb}},
	object.KindHTTPRoute:     {gatewayv1.GroupVersion.String(), []string{object.KindHTTPRoute, object.KindGslb}},
	object.KindGRPCRoute:     {gatewayv1.GroupVersion.String(), []string{object.KindGRPCRoute, object.KindGslb}},
	object.KindTLSRoute:      {gatewayv1.GroupVersion.String(), []string{object.KindTLSRoute, object.KindGslb}},
	object.KindTCPRoute:      {gatewayv1.GroupVersion.String(), []string{object.KindGslb}},
	object.KindUDPRoute:      {gatewayv1.GroupVersion.String(), []string{object.KindGslb}},
	object.KindEndpointSlice: {"discovery.k8s.io/v1", append([]string{object.KindIngress, object.KindService, object.KindGslb}, routeKinds...)},
	object.KindIngressClass:  {"networking.k8s.io/v1", []string{object.KindIngress}},
	object.KindGateway:       {gatewayv1.GroupVersion.String(), append([]string{object.KindGslb}, routeKinds...)},
	object.KindGslb:          {object.GslbGroup + "/" + object.GslbVersion, []string{object.KindGslb}},
}

// acceptedKinds lists, for messages, every kind a manifest file may hold.
var acceptedKinds = strings.Join(append(slices.Clone(object.Kinds), object.KindTCPRoute, object.KindUDPRoute, object.KindEndpointSlice, object.KindIngressClass, object.KindGateway), ", ") + ", or a List of them"

// Config is what the folder feed reads of the block.
type Config struct {
	derive.Options
	Directory string
	// Namespaces and selector select the objects served (empty, nil: all).
	Namespaces []string
	Selector   labels.Selector
	Resources  []string
	TTL        uint32
}

// serves reports whether kind is among the resources served.
func (cfg *Config) serves(kind string) bool { return slices.Contains(cfg.Resources, kind) }

// Selects reports whether an object in namespace ns with these labels is
// served: the folder's equivalent of the API's namespace and label selector.
func (cfg *Config) Selects(ns string, l map[string]string) bool {
	if len(cfg.Namespaces) > 0 && !slices.Contains(cfg.Namespaces, ns) {
		return false
	}
	return cfg.Selector == nil || cfg.Selector.Matches(labels.Set(l))
}

// reads reports whether the directory reads documents of kind, given the
// kinds served; known is false for a kind it never reads.
func (cfg *Config) reads(kind string) (read, known bool) {
	if kind == object.KindDNSEndpoint {
		return cfg.serves(kind), true
	}
	fk, ok := fileKinds[kind]
	if !ok {
		return false, false
	}
	return slices.ContainsFunc(fk.neededBy, cfg.serves), true
}

// derives reports whether any kind served is derived (not a DNSEndpoint).
func (cfg *Config) derives() bool {
	return slices.ContainsFunc(cfg.Resources, func(k string) bool { return k != object.KindDNSEndpoint })
}

// fileSource is one object of a file that k8scrd derives: an Ingress, a
// Service or a route, decoded.
type fileSource struct {
	Key                   string // "file:BASE#" + sourceKey(kind, namespace, name), unique in the file
	Kind, Namespace, Name string
	Line                  int
	Obj                   any // *networkingv1.Ingress, *corev1.Service, *gatewayv1.HTTPRoute, ...
}

// Derive runs the API source's derivation of the object. An object of a
// kind read only for the Gslbs that name it declares nothing of its own.
func (s *fileSource) Derive(cfg *Config, w *DirWorld) *derive.Declared {
	if !cfg.serves(s.Kind) && !object.IsGslbKind(s.Kind) {
		return nil
	}
	if g, ok := s.Obj.(*object.GslbObject); ok {
		d, out := derive.DeriveGslb(g, s.Kind, &cfg.Options, w)
		if out.Note != "" {
			w.Noted = append(w.Noted, s.Key+"\x00"+out.Note)
		}
		return d
	}
	d, _ := derive.Derive(s.Kind, s.Obj, &cfg.Options, w)
	return d
}

// fileSlice is what the directory keeps of an EndpointSlice, as the
// informers' cache does (readySlice).
type fileSlice struct {
	Namespace, service string
	ready              bool
}

// ParsedFile is what one manifest file holds.
type ParsedFile struct {
	Docs     []ManifestDoc // DNSEndpoints
	Sources  []fileSource  // derived kinds
	Slices   []fileSlice
	Classes  []*networkingv1.IngressClass
	Gateways []*gatewayv1.Gateway
	// Problems are every document that was left out, in file order (the
	// lint reports them all; the feed logs the first).
	Problems []fileProblem
}

// fileProblem is a document of a manifest file left out: one that does not
// parse, or (unknownKind) of a kind the directory never reads.
type fileProblem struct {
	Line        int
	Msg         string
	kind        string
	UnknownKind bool
}

// addKind decodes one document (or List item) of a kind other than
// DNSEndpoint that the directory reads. The namespaces and labels filter
// the derived kinds as they filter DNSEndpoints; EndpointSlices and
// Gateways are read in the namespaces served (whatever their labels), and
// IngressClasses (cluster-wide) always, as the informers read them.
func (p *ParsedFile) addKind(cfg *Config, path string, line int, kind string, item []byte, seen map[string]int) error {
	var obj any
	switch kind {
	case object.KindIngress:
		obj = &networkingv1.Ingress{}
	case object.KindService:
		obj = &corev1.Service{}
	case object.KindHTTPRoute:
		obj = &gatewayv1.HTTPRoute{}
	case object.KindGRPCRoute:
		obj = &gatewayv1.GRPCRoute{}
	case object.KindTLSRoute:
		obj = &gatewayv1.TLSRoute{}
	case object.KindTCPRoute:
		obj = &gatewayv1.TCPRoute{}
	case object.KindUDPRoute:
		obj = &gatewayv1.UDPRoute{}
	case object.KindGslb:
		obj = &object.GslbObject{}
	case object.KindEndpointSlice:
		obj = &discoveryv1.EndpointSlice{}
	case object.KindIngressClass:
		obj = &networkingv1.IngressClass{}
	case object.KindGateway:
		obj = &gatewayv1.Gateway{}
	default:
		return fmt.Errorf("kind %q is not one the directory reads", kind)
	}
	if err := json.Unmarshal(item, obj); err != nil {
		return fmt.Errorf("%s: %v", kind, err)
	}
	switch o := obj.(type) {
	case *networkingv1.IngressClass:
		p.Classes = append(p.Classes, o)
		return nil
	case *discoveryv1.EndpointSlice:
		if o.Namespace == "" {
			o.Namespace = "default"
		}
		if len(cfg.Namespaces) == 0 || slices.Contains(cfg.Namespaces, o.Namespace) {
			p.Slices = append(p.Slices, fileSlice{Namespace: o.Namespace, service: o.Labels[object.LabelServiceName], ready: object.SliceReady(o)})
		}
		return nil
	case *gatewayv1.Gateway:
		if o.Namespace == "" {
			o.Namespace = "default"
		}
		if len(cfg.Namespaces) == 0 || slices.Contains(cfg.Namespaces, o.Namespace) {
			p.Gateways = append(p.Gateways, o)
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
	case *object.GslbObject:
		m = &metaFields{&o.Namespace, o.Name, o.Labels}
		if o.APIVersion == object.GslbLegacyGroup+"/"+object.GslbVersion {
			kind = object.KindGslbLegacy
		}
	}
	if *m.namespace == "" {
		*m.namespace = "default"
	}
	ns := *m.namespace
	if !cfg.Selects(ns, m.labels) {
		return nil
	}
	sk := derive.SourceKey(kind, ns, m.name)
	key := "file:" + filepath.Base(path) + "#" + sk
	if n := seen[sk]; n > 0 {
		key += "#" + strconv.Itoa(n+1)
	}
	seen[sk]++
	p.Sources = append(p.Sources, fileSource{Key: key, Kind: kind, Namespace: ns, Name: m.name, Line: line, Obj: obj})
	return nil
}

type metaFields struct {
	namespace *string
	name      string
	labels    map[string]string
}

// DirWorld is the world of the directory's derivations: the EndpointSlices,
// IngressClasses and Gateways of every file of the folder.
type DirWorld struct {
	readyBy      map[string]bool // "namespace/service" -> a slice of it has a ready endpoint
	defaultClass string
	gateways     map[string]*gatewayv1.Gateway // "namespace/name"; the first file (by name) wins
	// objs are the derived kinds' objects, for the Gslbs that name them
	// ("Kind/namespace/name"; the first file wins).
	objs  map[string]any
	Noted []string // the Gslb notes of this derivation (source key + note)
}

func NewDirWorld(files map[string]*ManifestFile) *DirWorld {
	w := &DirWorld{readyBy: map[string]bool{}, gateways: map[string]*gatewayv1.Gateway{}, objs: map[string]any{}}
	var best *networkingv1.IngressClass
	for _, base := range SortedKeys(files) {
		f := files[base]
		for _, s := range f.Sources {
			k := s.Kind + "/" + s.Namespace + "/" + s.Name
			if _, ok := w.objs[k]; !ok {
				w.objs[k] = s.Obj
			}
		}
		for _, s := range f.Slices {
			if s.service == "" {
				continue
			}
			k := s.Namespace + "/" + s.service
			w.readyBy[k] = w.readyBy[k] || s.ready
		}
		for _, g := range f.Gateways {
			k := g.Namespace + "/" + g.Name
			if _, ok := w.gateways[k]; !ok {
				w.gateways[k] = g
			}
		}
		// The newest class marked default, as cluster.defaultIngressClass picks it.
		for _, ic := range f.Classes {
			if ic.Annotations[object.AnnotationDefaultClass] != "true" {
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

func (w *DirWorld) Ready(namespace, name string) bool { return w.readyBy[namespace+"/"+name] }
func (w *DirWorld) DefaultIngressClass() string       { return w.defaultClass }
func (w *DirWorld) Gateway(namespace, name string) *gatewayv1.Gateway {
	return w.gateways[namespace+"/"+name]
}
func (w *DirWorld) Object(kind, namespace, name string) any {
	return w.objs[kind+"/"+namespace+"/"+name]
}
func (w *DirWorld) Objects(kind, namespace string) []any {
	var out []any
	for _, k := range SortedKeys(w.objs) {
		if strings.HasPrefix(k, kind+"/"+namespace+"/") {
			out = append(out, w.objs[k])
		}
	}
	return out
}

func SortedKeys[V any](m map[string]V) []string {
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
	decl     *derive.Declared
	problems string // what was last logged of it
}

// derive derives every derived object of the folder again and hands the
// builder what changed: upserts for objects whose declaration changed,
// removals for those gone. Every object is derived again on any change,
// not only those that read what changed: a folder of manifests is small,
// and this keeps the directory free of the API source's dependency index.
// at is when the change happened (for the propagation delay metric).
func (d *Feed) derive(at time.Time) {
	if d.derived == nil {
		d.derived = map[string]*derivedFile{}
	}
	w := NewDirWorld(d.files)
	seen := map[string]bool{}
	for _, base := range SortedKeys(d.files) {
		f := d.files[base]
		for i := range f.Sources {
			s := &f.Sources[i]
			decl := s.Derive(d.cfg, w)
			if decl == nil {
				continue
			}
			seen[s.Key] = true
			old := d.derived[s.Key]
			if old != nil && reflect.DeepEqual(old.decl, decl) {
				continue
			}
			// Status host names are not resolved: the directory has no
			// resolver (README), so only status addresses are targets.
			o, bad := decl.Object(nil, d.cfg.Zones, d.cfg.TTL)
			o.Key = s.Key
			if o.Created.IsZero() {
				o.Created = f.Mtime
			}
			o.Changed = f.Mtime
			if at.After(o.Changed) {
				o.Changed = at
			}
			o.Version = uint64(max(o.Changed.Unix(), 0))
			problems := d.logBad(filepath.Join(d.dir, base), s, decl.Bad, bad, old)
			d.derived[s.Key] = &derivedFile{decl: decl, problems: problems}
			d.B.Upsert(o)
		}
	}
	for key := range d.derived {
		if !seen[key] {
			delete(d.derived, key)
			d.B.RemoveAt(key, uint64(max(at.Unix(), 0)))
		}
	}
	notes := map[string]bool{}
	for _, n := range w.Noted {
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
func (d *Feed) logBad(path string, s *fileSource, declBad []string, bad []object.Invalid, old *derivedFile) string {
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
	log.Warningf("%s:%d: %s %s/%s: %s; skipped, the rest of it is served", path, s.Line, s.Kind, s.Namespace, s.Name, msg)
	return msg
}
