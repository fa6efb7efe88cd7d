package kubefeed

import (
	"context"
	"maps"
	"slices"

	"github.com/fleetdns/fleetdns/plugin/k8scrd/derive"
	"github.com/fleetdns/fleetdns/plugin/k8scrd/object"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/tools/cache"
	gatewayv1 "sigs.k8s.io/gateway-api/apis/v1"
)

// watchedKinds are the kinds cluster.start watches with the core API
// clients: the derived kinds served, and with the Gslb source the
// Ingresses and Services a Gslb may name.
func (c *cluster) watchedKinds() []string {
	ks := slices.DeleteFunc(c.derivedKinds(), func(k string) bool { return object.CRDName(k) != "" || k == object.KindGslb })
	if c.cfg.serves(object.KindGslb) {
		for _, k := range []string{object.KindIngress, object.KindService} {
			if !slices.Contains(ks, k) {
				ks = append(ks, k)
			}
		}
	}
	return ks
}

// crdKinds are the kinds watched once their CRD is established: the route
// kinds served (or, with the Gslb source, that a Gslb may name), their
// Gateways, and both Gslb groups.
func (c *cluster) crdKinds() []string {
	var ks []string
	for _, k := range c.derivedKinds() {
		if object.GatewayKinds[k] != "" {
			ks = append(ks, k)
		}
	}
	if c.cfg.serves(object.KindGslb) {
		for _, k := range []string{object.KindHTTPRoute, object.KindGRPCRoute, object.KindTLSRoute, object.KindTCPRoute, object.KindUDPRoute} {
			if !slices.Contains(ks, k) {
				ks = append(ks, k)
			}
		}
	}
	if len(ks) > 0 {
		ks = append(ks, object.KindGateway)
	}
	if c.cfg.serves(object.KindGslb) {
		ks = append(ks, object.KindGslb, object.KindGslbLegacy)
	}
	return ks
}

// kindHandler is the event handler of a derived kind's informers: its
// objects are queued when the kind is served, and the Gslbs that name
// them are derived again when the Gslb source is.
func (c *cluster) kindHandler(kind string) cache.ResourceEventHandler {
	own := c.cfg.serves(kind) || object.IsGslbKind(kind)
	if _, refd := object.GslbRefKinds[kind]; !refd || !c.cfg.serves(object.KindGslb) {
		return c.objectHandler(kind)
	}
	var hs []cache.ResourceEventHandler
	if own {
		hs = append(hs, c.objectHandler(kind))
	}
	hs = append(hs, metaHandler(func(m metav1.Object) {
		c.touch(derive.DepRef + kind + ":" + m.GetNamespace() + "/" + m.GetName())
		c.touch(derive.DepRefNS + kind + ":" + m.GetNamespace())
	}, nil))
	return cache.ResourceEventHandlerFuncs{
		AddFunc: func(obj any) {
			for _, h := range hs {
				h.OnAdd(obj, false)
			}
		},
		UpdateFunc: func(old, obj any) {
			for _, h := range hs {
				h.OnUpdate(old, obj)
			}
		},
		DeleteFunc: func(obj any) {
			for _, h := range hs {
				h.OnDelete(obj)
			}
		},
	}
}

// startGslbKind starts the informers of a kind only the Gslb source
// watches: the Gslbs of either group (through the dynamic client), and
// TCPRoutes and UDPRoutes.
func (c *cluster) startGslbKind(kind string, namespaces []string) (*watched, error) {
	switch kind {
	case object.KindTCPRoute:
		return c.watch(kind, "tcproutes", c.gw.GatewayV1().RESTClient(), &gatewayv1.TCPRoute{}, namespaces, "", nil, c.kindHandler(kind))
	case object.KindUDPRoute:
		return c.watch(kind, "udproutes", c.gw.GatewayV1().RESTClient(), &gatewayv1.UDPRoute{}, namespaces, "", nil, c.kindHandler(kind))
	}
	group := object.GslbGroup
	if kind == object.KindGslbLegacy {
		group = object.GslbLegacyGroup
	}
	gvr := schema.GroupVersionResource{Group: group, Version: object.GslbVersion, Resource: "gslbs"}
	w := &watched{byNS: map[string]cache.SharedIndexInformer{}}
	for _, ns := range namespaces {
		ri := c.dyn.Resource(gvr).Namespace(ns)
		lw := &cache.ListWatch{
			ListWithContextFunc: func(ctx context.Context, o metav1.ListOptions) (runtime.Object, error) {
				o.LabelSelector = c.cfg.Labels
				return ri.List(ctx, o)
			},
			WatchFuncWithContext: func(ctx context.Context, o metav1.ListOptions) (watch.Interface, error) {
				o.LabelSelector = c.cfg.Labels
				return ri.Watch(ctx, o)
			},
		}
		if err := c.inform(w, ns, gvr.Resource+"."+group, lw, &unstructured.Unstructured{}, cache.Indexers{}, object.TrimGslb, c.kindHandler(kind)); err != nil {
			return nil, err
		}
	}
	c.run(kind, w)
	return w, nil
}

// Object implements gslbWorld.
func (c *cluster) Object(kind, namespace, name string) any {
	c.mu.Lock()
	w := c.kinds[kind]
	c.mu.Unlock()
	return w.get(namespace, name)
}

// gslbIndexers are the indexers of kind's informers: indexers, and with the
// Gslb source, for a kind a Gslb's label selector lists, the namespace
// index objects reads.
func (c *cluster) gslbIndexers(kind string, indexers cache.Indexers) cache.Indexers {
	out := cache.Indexers{}
	maps.Copy(out, indexers)
	if _, refd := object.GslbRefKinds[kind]; refd && c.cfg.serves(object.KindGslb) {
		out[cache.NamespaceIndex] = cache.MetaNamespaceIndexFunc
	}
	return out
}

// Objects implements gslbWorld: through the namespace index, one
// namespace's objects, not every object of the kind in the cluster.
func (c *cluster) Objects(kind, namespace string) []any {
	c.mu.Lock()
	w := c.kinds[kind]
	c.mu.Unlock()
	idx := w.indexer(namespace)
	if idx == nil {
		return nil
	}
	list, err := idx.ByIndex(cache.NamespaceIndex, namespace)
	if err != nil { // no such index
		list = idx.List()
	}
	var out []any
	for _, o := range list {
		if m, err := meta.Accessor(o); err == nil && m.GetNamespace() == namespace {
			out = append(out, object.Derivable(o))
		}
	}
	return out
}

// deriveGslbAt derives the Gslb of kind at namespace/name from the cache;
// uses are the dependency keys to record besides its Services and Gateways.
func (c *cluster) deriveGslbAt(key, kind, ns, name string) (d *derive.Declared, uses []string) {
	g, ok := c.Object(kind, ns, name).(*object.GslbObject)
	if !ok {
		c.note(key, kind, ns, name, "")
		return nil, nil
	}
	d, out := derive.DeriveGslb(g, kind, &c.cfg.Options, c)
	if c.note(key, kind, ns, name, out.Note) && out.Refused {
		// A reference into another namespace: counted and told the
		// Gslb's owners, once per distinct note as it is logged.
		object.InvalidEndpoints.WithLabelValues("reference").Inc()
		c.b.Report(&object.Object{Kind: kind, Namespace: ns, Name: name, UID: string(g.UID)}, "ReferenceRefused", out.Note)
	}
	return d, out.Uses
}

// note logs what the derivation of a Gslb says about it, once per distinct
// note; it tells whether note was logged now.
func (c *cluster) note(key, kind, ns, name, note string) bool {
	if !c.remember(c.notes, key, note) {
		return false
	}
	log.Warningf("%s %s/%s: %s", kind, ns, name, note)
	return true
}

// gslbSynced tells the owners of k8gb's DNSEndpoints whether the Gslb at
// key is served, after its declaration reached the builder: a served
// Gslb's operator-written DNSEndpoints are ignored from then on.
func (c *cluster) gslbSynced(key, kind, ns, name string) {
	if c.owners == nil {
		return
	}
	// A legacy Gslb migrated to k8gb.io counts as served: its twin is.
	g, ok := c.Object(kind, ns, name).(*object.GslbObject)
	if !ok {
		c.owners.unserve(key)
		return
	}
	c.owners.serve(key, string(g.UID))
}

// --- k8gb's DNSEndpoints under a served Gslb ---
