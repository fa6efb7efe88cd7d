package kubefeed

import (
	"context"
	"net/netip"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/fleetdns/fleetdns/plugin/k8scrd/derive"
	"github.com/fleetdns/fleetdns/plugin/k8scrd/object"

	"github.com/fleetdns/fleetdns/plugin/k8scrd/kube"
	"github.com/fleetdns/fleetdns/plugin/k8scrd/resolve"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	networkingv1 "k8s.io/api/networking/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/dynamic"
	clientset "k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/util/workqueue"
	gatewayv1 "sigs.k8s.io/gateway-api/apis/v1"
	gatewayclient "sigs.k8s.io/gateway-api/pkg/client/clientset/versioned"
)

// cluster watches the cluster's own objects (the kinds of `resources` other
// than DNSEndpoint) and what their derivation reads: EndpointSlices for
// health, IngressClasses for the default class, Gateways for routes. Events
// only queue keys; one worker derives each queued object from the
// informers' caches and hands the result to the builder, which coalesces
// as it does for DNSEndpoints. A change to an EndpointSlice or a Gateway
// queues exactly the objects whose last derivation read it.
//
// The Gateway API kinds are watched only once their CRD is established:
// absent, that is logged once and the CRD is watched for, so that routes
// installed later are served without a restart.
type cluster struct {
	cfg *Config
	b   object.Sink
	res hostResolver // nil: status host names are not resolved

	cs  clientset.Interface
	gw  gatewayclient.Interface
	dyn dynamic.Interface

	ctx   context.Context
	wg    *sync.WaitGroup
	queue *workqueue.Typed[string]

	kinds   map[string]*watched // derived kinds and Gateway
	classes *watched
	drained chan struct{} // closed when the worker reached the first sync's marker

	mu      sync.Mutex
	synced  []cache.InformerSynced // every informer started so far
	started map[string]bool        // kinds whose informers run
	deps    *dependents            // what each object's last derivation read, and who read what
	bad     map[string]string      // object key -> the problems last logged
	gone    map[string]uint64      // object key -> its deletion's resourceVersion, until sync removes it
	// sliceIdx holds the EndpointSlices by their Service (sliceHandler):
	// an informer index would cost a set per Service.
	sliceIdx map[serviceRef][]*object.ReadySlice

	// The Gslb source (derive/gslb.go): what was last logged of each Gslb,
	// and the owners of k8gb's DNSEndpoints (nil without resources Gslb).
	notes  map[string]string
	owners *gslbOwners
}

// hostResolver resolves load balancers' status host names (package resolve).
type hostResolver interface {
	Track(key string, hostnames []string, annotated bool)
	Addrs(hostname string) []netip.Addr
	Run(stop <-chan struct{})
}

// syncMarker is queued after the informers' first listing: when the worker
// reaches it, every object listed before has been derived.
const syncMarker = "\x00synced"

// Config is what the API feed reads of the block.
type Config struct {
	derive.Options
	Kubeconfig, Context string
	// Namespaces and labels select the objects watched (empty: all).
	Namespaces []string
	Labels     string
	// Resources are the kinds served.
	Resources []string
	// Resolvers resolve status host names (host:port).
	Resolvers []string
	TTL       uint32
}

// serves reports whether kind is among the resources served.
func (cfg *Config) serves(kind string) bool { return slices.Contains(cfg.Resources, kind) }

// watched is one kind's informers: one for all namespaces, or one per namespace named.
type watched struct {
	byNS map[string]cache.SharedIndexInformer
}

func (w *watched) indexer(ns string) cache.Indexer {
	if w == nil {
		return nil
	}
	if i, ok := w.byNS[metav1.NamespaceAll]; ok {
		return i.GetIndexer()
	}
	if i, ok := w.byNS[ns]; ok {
		return i.GetIndexer()
	}
	return nil
}

func (w *watched) get(ns, name string) any {
	idx := w.indexer(ns)
	if idx == nil {
		return nil
	}
	key := name
	if ns != "" {
		key = ns + "/" + name
	}
	o, ok, _ := idx.GetByKey(key)
	if !ok {
		return nil
	}
	return object.Derivable(o)
}

func (w *watched) list() []any {
	if w == nil {
		return nil
	}
	var all []any
	for _, i := range w.byNS {
		all = append(all, i.GetIndexer().List()...)
	}
	return all
}

func newCluster(cfg *Config, b object.Sink, rc *rest.Config) (*cluster, error) {
	// The core kinds in protobuf: smaller and faster to decode than JSON.
	// Custom resources (the Gateway API, the dynamic client) have no
	// protobuf encoding and keep rc's JSON.
	pc := rest.CopyConfig(rc)
	pc.ContentType = runtime.ContentTypeProtobuf
	pc.AcceptContentTypes = runtime.ContentTypeProtobuf + "," + runtime.ContentTypeJSON
	cs, err := clientset.NewForConfig(pc)
	if err != nil {
		return nil, err
	}
	gw, err := gatewayclient.NewForConfig(rc)
	if err != nil {
		return nil, err
	}
	dyn, err := dynamic.NewForConfig(rc)
	if err != nil {
		return nil, err
	}
	c := &cluster{
		cfg: cfg, b: b, cs: cs, gw: gw, dyn: dyn,
		queue:    workqueue.NewTyped[string](),
		kinds:    map[string]*watched{},
		drained:  make(chan struct{}),
		started:  map[string]bool{},
		deps:     newDependents(),
		sliceIdx: map[serviceRef][]*object.ReadySlice{},
		bad:      map[string]string{},
		notes:    map[string]string{},
		gone:     map[string]uint64{},
	}
	c.res = resolve.New(cfg.Resolvers, resolveFloor, resolveCeiling, resolveMaxNames, func(keys []string) {
		for _, k := range keys {
			c.queue.Add(k)
		}
	})
	return c, nil
}

// The bounds of status host name resolution: re-resolved at the answer's
// TTL within [resolveFloor, resolveCeiling], at most resolveMaxNames names.
const (
	resolveFloor    = 5 * time.Second
	resolveCeiling  = 300 * time.Second
	resolveMaxNames = 1000
)

// derivedKinds are the kinds served that k8scrd derives.
func (c *cluster) derivedKinds() []string {
	return slices.DeleteFunc(slices.Clone(c.cfg.Resources), func(k string) bool { return k == object.KindDNSEndpoint })
}

// start starts the informers and the worker; hasSynced reports when the
// first listing of everything present has been derived.
func (c *cluster) start(ctx context.Context, wg *sync.WaitGroup) (hasSynced cache.InformerSynced, err error) {
	c.ctx, c.wg = ctx, wg
	namespaces := c.cfg.Namespaces
	if len(namespaces) == 0 {
		namespaces = []string{metav1.NamespaceAll}
	}
	// EndpointSlices are read through sliceIdx, which sliceHandler keeps.
	_, err = c.watch("", "endpointslices", c.cs.DiscoveryV1().RESTClient(), &discoveryv1.EndpointSlice{}, namespaces, "", nil, c.sliceHandler())
	if err != nil {
		return nil, err
	}
	for _, k := range c.watchedKinds() {
		switch k {
		case object.KindIngress:
			if c.cfg.serves(object.KindIngress) { // a Gslb's Ingress is not filtered by class
				c.classes, err = c.watch("", "ingressclasses", c.cs.NetworkingV1().RESTClient(), &networkingv1.IngressClass{}, []string{metav1.NamespaceAll}, "", nil, c.classHandler())
			}
			if err == nil {
				_, err = c.watch(k, "ingresses", c.cs.NetworkingV1().RESTClient(), &networkingv1.Ingress{}, namespaces, c.cfg.Labels, nil, c.kindHandler(k))
			}
		case object.KindService:
			_, err = c.watch(k, "services", c.cs.CoreV1().RESTClient(), &corev1.Service{}, namespaces, c.cfg.Labels, nil, c.kindHandler(k))
		}
		if err != nil {
			return nil, err
		}
	}
	var crdSynced []cache.InformerSynced
	for _, k := range c.crdKinds() {
		s, err := c.watchCRD(k)
		if err != nil {
			return nil, err
		}
		crdSynced = append(crdSynced, s)
	}
	wg.Add(1)
	go func() {
		defer wg.Done()
		c.work()
	}()
	wg.Add(1)
	go func() {
		defer wg.Done()
		<-ctx.Done()
		c.queue.ShutDown()
	}()
	if c.res != nil {
		wg.Add(1)
		go func() {
			defer wg.Done()
			c.res.Run(ctx.Done())
		}()
	}
	marked := false
	return func() bool {
		for _, s := range crdSynced {
			if !s() {
				return false
			}
		}
		c.mu.Lock()
		synced := slices.Clone(c.synced)
		c.mu.Unlock()
		for _, s := range synced {
			if !s() {
				return false
			}
		}
		if !marked {
			marked = true
			c.queue.Add(syncMarker)
		}
		select {
		case <-c.drained:
			return true
		default:
			return false
		}
	}, nil
}

// watch starts one informer per namespace for resource, objects cut down by
// transform; labels is the label selector ("" for every object); kind, when
// set, names the kind they hold (see run).
func (c *cluster) watch(kind, resource string, client cache.Getter, example runtime.Object, namespaces []string, labels string, indexers cache.Indexers, h cache.ResourceEventHandler) (*watched, error) {
	w := &watched{byNS: map[string]cache.SharedIndexInformer{}}
	indexers = c.gslbIndexers(kind, indexers)
	for _, ns := range namespaces {
		lw := cache.NewFilteredListWatchFromClient(client, resource, ns, func(o *metav1.ListOptions) { o.LabelSelector = labels })
		if err := c.inform(w, ns, resource, lw, example, indexers, object.Trim, h); err != nil {
			return nil, err
		}
	}
	c.run(kind, w)
	return w, nil
}

// inform adds to w the informer of namespace ns over lw, its objects cut
// down by transform as they arrive, its errors logged once per change
// (watchError) and its first listing awaited with the others'.
func (c *cluster) inform(w *watched, ns, resource string, lw cache.ListerWatcher, example runtime.Object, indexers cache.Indexers, transform cache.TransformFunc, h cache.ResourceEventHandler) error {
	inf := cache.NewSharedIndexInformer(lw, example, 0, indexers)
	if err := inf.SetTransform(transform); err != nil {
		return err
	}
	if err := inf.SetWatchErrorHandler(watchError(resource, ns)); err != nil {
		return err
	}
	reg, err := inf.AddEventHandler(h)
	if err != nil {
		return err
	}
	w.byNS[ns] = inf
	c.mu.Lock()
	c.synced = append(c.synced, reg.HasSynced)
	c.mu.Unlock()
	return nil
}

// run starts w's informers; with kind set, they are the kind's (c.kinds)
// before they run: an event the worker takes at once must find the object
// in them, or it would be taken for a deletion and never derived.
func (c *cluster) run(kind string, w *watched) {
	if kind != "" {
		c.mu.Lock()
		c.kinds[kind] = w
		c.mu.Unlock()
	}
	for _, inf := range w.byNS {
		c.wg.Add(1)
		go func() {
			defer c.wg.Done()
			inf.RunWithContext(c.ctx)
		}()
	}
}

// watchCRD watches the CRD that serves kind and starts kind's informers
// once it is established (at start-up, or whenever it is installed).
func (c *cluster) watchCRD(kind string) (cache.InformerSynced, error) {
	name := object.CRDName(kind)
	gvr := schema.GroupVersionResource{Group: "apiextensions.k8s.io", Version: "v1", Resource: "customresourcedefinitions"}
	lw := &cache.ListWatch{
		ListWithContextFunc: func(ctx context.Context, o metav1.ListOptions) (runtime.Object, error) {
			o.FieldSelector = "metadata.name=" + name
			return c.dyn.Resource(gvr).List(ctx, o)
		},
		WatchFuncWithContext: func(ctx context.Context, o metav1.ListOptions) (watch.Interface, error) {
			o.FieldSelector = "metadata.name=" + name
			return c.dyn.Resource(gvr).Watch(ctx, o)
		},
	}
	inf := cache.NewSharedIndexInformer(lw, &unstructured.Unstructured{}, 0, cache.Indexers{})
	if err := inf.SetWatchErrorHandler(watchError("customresourcedefinitions", "")); err != nil {
		return nil, err
	}
	established := func(obj any) {
		if u, ok := obj.(*unstructured.Unstructured); ok && crdEstablished(u) {
			c.startKind(kind)
		}
	}
	reg, err := inf.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    established,
		UpdateFunc: func(_, obj any) { established(obj) },
	})
	if err != nil {
		return nil, err
	}
	c.wg.Add(1)
	go func() {
		defer c.wg.Done()
		inf.RunWithContext(c.ctx)
	}()
	c.wg.Add(1)
	go func() {
		defer c.wg.Done()
		if cache.WaitForCacheSync(c.ctx.Done(), reg.HasSynced) {
			c.mu.Lock()
			up := c.started[kind]
			c.mu.Unlock()
			if !up {
				log.Warningf("CRD %s is not installed: %s objects are not served until it is (watching for it)", name, kind)
			}
		}
	}()
	return reg.HasSynced, nil
}

// crdEstablished reports whether a CRD's status says Established=True.
func crdEstablished(u *unstructured.Unstructured) bool {
	conds, _, _ := unstructured.NestedSlice(u.Object, "status", "conditions")
	for _, c := range conds {
		m, _ := c.(map[string]any)
		if m["type"] == "Established" && m["status"] == "True" {
			return true
		}
	}
	return false
}

// startKind starts the informers of a Gateway API kind (or a kind of the Gslb source), once.
func (c *cluster) startKind(kind string) {
	c.mu.Lock()
	if c.started[kind] {
		c.mu.Unlock()
		return
	}
	c.started[kind] = true
	c.mu.Unlock()
	namespaces := c.cfg.Namespaces
	if len(namespaces) == 0 {
		namespaces = []string{metav1.NamespaceAll}
	}
	rc := c.gw.GatewayV1().RESTClient()
	var w *watched
	var err error
	switch kind {
	case object.KindGateway:
		w, err = c.watch(kind, "gateways", rc, &gatewayv1.Gateway{}, namespaces, "", nil, c.dependencyHandler(derive.DepGateway))
	case object.KindHTTPRoute:
		w, err = c.watch(kind, "httproutes", rc, &gatewayv1.HTTPRoute{}, namespaces, c.cfg.Labels, nil, c.kindHandler(kind))
	case object.KindGRPCRoute:
		w, err = c.watch(kind, "grpcroutes", rc, &gatewayv1.GRPCRoute{}, namespaces, c.cfg.Labels, nil, c.kindHandler(kind))
	case object.KindTLSRoute:
		w, err = c.watch(kind, "tlsroutes", rc, &gatewayv1.TLSRoute{}, namespaces, c.cfg.Labels, nil, c.kindHandler(kind))
	default: // derive/gslb.go
		w, err = c.startGslbKind(kind, namespaces)
	}
	if err != nil {
		log.Errorf("Watching %s: %v", kind, err)
		return
	}
	c.mu.Lock()
	c.kinds[kind] = w
	c.mu.Unlock()
	log.Infof("Watching %s objects (CRD %s established)", kind, object.CRDName(kind))
	if kind == object.KindGateway {
		// Routes derived before their Gateways were watched read none.
		c.requeue(object.KindHTTPRoute, object.KindGRPCRoute, object.KindTLSRoute)
	}
}

// requeue queues every object of kinds that are served (a kind watched
// only for the Gslb source is not).
func (c *cluster) requeue(kinds ...string) {
	for _, k := range kinds {
		if !c.cfg.serves(k) {
			continue
		}
		c.mu.Lock()
		w := c.kinds[k]
		c.mu.Unlock()
		for _, o := range w.list() {
			if m, err := meta.Accessor(o); err == nil {
				c.queue.Add(derive.SourceKey(k, m.GetNamespace(), m.GetName()))
			}
		}
	}
}

// metaHandler calls f with the metadata of an object added, changed or
// deleted (del for a deletion when set), tombstones unwrapped. An update
// of the same resourceVersion (a resync or relist) is no change.
func metaHandler(f, del func(metav1.Object)) cache.ResourceEventHandler {
	if del == nil {
		del = f
	}
	call := func(g func(metav1.Object)) func(any) {
		return func(obj any) {
			if d, ok := obj.(cache.DeletedFinalStateUnknown); ok {
				obj = d.Obj
			}
			if m, err := meta.Accessor(obj); err == nil {
				g(m)
			}
		}
	}
	changed := call(f)
	return cache.ResourceEventHandlerFuncs{
		AddFunc: changed,
		UpdateFunc: func(old, obj any) {
			o, err1 := meta.Accessor(old)
			n, err2 := meta.Accessor(obj)
			if err1 == nil && err2 == nil && o.GetResourceVersion() == n.GetResourceVersion() {
				return
			}
			changed(obj)
		},
		DeleteFunc: call(del),
	}
}

// objectHandler queues the objects of a derived kind as they change.
func (c *cluster) objectHandler(kind string) cache.ResourceEventHandler {
	queue := func(m metav1.Object) { c.queue.Add(derive.SourceKey(kind, m.GetNamespace(), m.GetName())) }
	return metaHandler(queue, func(m metav1.Object) {
		// The deletion's resourceVersion, for the SOA serial (sync).
		c.mu.Lock()
		c.gone[derive.SourceKey(kind, m.GetNamespace(), m.GetName())] = resourceVersion(m)
		c.mu.Unlock()
		queue(m)
	})
}

// dependencyHandler queues the objects whose derivation read what changed.
func (c *cluster) dependencyHandler(prefix string) cache.ResourceEventHandler {
	return metaHandler(func(m metav1.Object) { c.touch(prefix + m.GetNamespace() + "/" + m.GetName()) }, nil)
}

// serviceRef names a Service: the EndpointSlices' index key.
type serviceRef struct{ namespace, name string }

// sliceHandler indexes the EndpointSlices by their Service and queues the
// objects backed by a Service whose readiness may have changed.
func (c *cluster) sliceHandler() cache.ResourceEventHandler {
	slice := func(obj any) *object.ReadySlice {
		if d, ok := obj.(cache.DeletedFinalStateUnknown); ok {
			obj = d.Obj
		}
		s, _ := obj.(*object.ReadySlice)
		return s
	}
	touch := func(s *object.ReadySlice) {
		if s != nil && s.Service != "" {
			c.touch(derive.DepService + s.Namespace + "/" + s.Service)
		}
	}
	return cache.ResourceEventHandlerFuncs{
		AddFunc: func(obj any) {
			s := slice(obj)
			c.indexSlice(nil, s)
			touch(s)
		},
		UpdateFunc: func(old, obj any) {
			o, n := slice(old), slice(obj)
			c.indexSlice(o, n)
			if o != nil && n != nil && o.Ready == n.Ready && o.Service == n.Service {
				return // endpoints changed, readiness did not
			}
			if o != nil && n != nil && o.Service != n.Service {
				touch(o)
			}
			touch(n)
		},
		DeleteFunc: func(obj any) {
			s := slice(obj)
			c.indexSlice(s, nil)
			touch(s)
		},
	}
}

// indexSlice replaces old by s in the slices' index (either may be nil).
func (c *cluster) indexSlice(old, s *object.ReadySlice) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if old != nil && old.Service != "" {
		ref := serviceRef{old.Namespace, old.Service}
		list := slices.DeleteFunc(c.sliceIdx[ref], func(x *object.ReadySlice) bool { return x.Name == old.Name })
		if len(list) == 0 {
			delete(c.sliceIdx, ref)
		} else {
			c.sliceIdx[ref] = list
		}
	}
	if s != nil && s.Service != "" {
		ref := serviceRef{s.Namespace, s.Service}
		list := slices.DeleteFunc(c.sliceIdx[ref], func(x *object.ReadySlice) bool { return x.Name == s.Name })
		c.sliceIdx[ref] = append(list, s)
	}
}

// classHandler derives every Ingress again: the default class changed.
func (c *cluster) classHandler() cache.ResourceEventHandler {
	all := func(any) { c.requeue(object.KindIngress) }
	return cache.ResourceEventHandlerFuncs{AddFunc: all, UpdateFunc: func(_, o any) { all(o) }, DeleteFunc: all}
}

func (c *cluster) touch(dep string) {
	c.mu.Lock()
	keys := c.deps.readers(dep)
	c.mu.Unlock()
	for _, k := range keys {
		c.queue.Add(k)
	}
}

func (c *cluster) work() {
	for {
		key, shutdown := c.queue.Get()
		if shutdown {
			return
		}
		if key == syncMarker {
			close(c.drained)
		} else {
			c.sync(key)
		}
		c.queue.Done(key)
	}
}

// sync derives the object at key again from the caches and hands the
// result to the builder.
func (c *cluster) sync(key string) {
	kind, nsName, _ := strings.Cut(key, ":")
	ns, name, _ := strings.Cut(nsName, "/")
	if object.IsGslbKind(kind) { // derive/gslb.go
		defer c.gslbSynced(key, kind, ns, name)
	}
	c.mu.Lock()
	w := c.kinds[kind]
	c.mu.Unlock()
	var d *derive.Declared
	var parents []string // a route's Gateways, read even when they do not accept it (yet)
	obj := w.get(ns, name)
	if _, ok := obj.(*object.GslbObject); ok {
		d, parents = c.deriveGslbAt(key, kind, ns, name)
	} else {
		var refs []gatewayv1.ParentReference
		var unserved []derive.UnservedName
		d, refs, unserved = derive.DeriveReported(kind, obj, &c.cfg.Options, c) // derive/skipped.go
		parents = derive.RouteParents(ns, refs)
		c.reportSkipped(kind, obj, d, unserved)
	}
	if d == nil {
		c.use(key, parents)
		if c.res != nil {
			c.res.Track(key, nil, false)
		}
		c.mu.Lock()
		delete(c.bad, key)
		version := c.gone[key]
		delete(c.gone, key)
		c.mu.Unlock()
		if m, err := meta.Accessor(obj); err == nil {
			version = max(version, resourceVersion(m)) // present, but no longer served
		}
		c.b.RemoveAt(key, version)
		return
	}
	var uses []string
	for _, s := range d.Services {
		uses = append(uses, derive.DepService+s)
	}
	for _, g := range d.Gateways {
		uses = append(uses, derive.DepGateway+g)
	}
	for _, p := range parents {
		if !slices.Contains(uses, p) {
			uses = append(uses, p)
		}
	}
	c.use(key, uses)
	var resolved func(string) []netip.Addr
	if c.res != nil {
		c.res.Track(key, d.Hostnames, d.AnnotatedHostnames)
		resolved = c.res.Addrs
	}
	// A change of health is a change of the object's answers: the
	// propagation delay counts from the newest write to its slices too.
	for _, s := range d.Services {
		ns, name, _ := strings.Cut(s, "/")
		if t := c.sliceChanged(ns, name); t.After(d.Changed) {
			d.Changed = t
		}
	}
	o, bad := d.Object(resolved, c.cfg.Zones, c.cfg.TTL)
	if o.Key == key {
		o.Key = key // the queue's copy: one string per object in the builder and the index, not one per derivation
	}
	o.Version = c.version(obj, d)
	problems := slices.Clone(d.Bad)
	for _, b := range bad {
		if b.Reason != object.ReasonZone {
			problems = append(problems, b.Msg)
		}
	}
	c.logBad(key, kind, ns, name, problems)
	c.b.Upsert(o)
}

// version is the SOA serial's version of a derived object: the highest
// resourceVersion among the object and the Gateways whose addresses it
// serves. Its EndpointSlices are left out: readiness changes what
// localtargets- and gslb answers hold (store.Host.Ready), never the zone's
// RRsets, so the serial stays where the zone data does (README).
func (c *cluster) version(obj any, d *derive.Declared) uint64 {
	var v uint64
	if m, err := meta.Accessor(obj); err == nil {
		v = resourceVersion(m)
	}
	for _, g := range d.Gateways {
		ns, name, _ := strings.Cut(g, "/")
		if gw := c.Gateway(ns, name); gw != nil {
			v = max(v, resourceVersion(gw))
		}
	}
	return v
}

// remember records msg as what was last said of key in m (c.bad or
// c.notes; an empty msg forgets key): true when msg is not empty and not
// what was said last, so that the same problem is logged once.
func (c *cluster) remember(m map[string]string, key, msg string) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	if msg == "" {
		delete(m, key)
		return false
	}
	if m[key] == msg {
		return false
	}
	m[key] = msg
	return true
}

// logBad logs and counts what of an object cannot be served, once per
// distinct set of problems, and reports it on the object.
func (c *cluster) logBad(key, kind, ns, name string, problems []string) {
	msg := strings.Join(problems, "; ")
	if !c.remember(c.bad, key, msg) {
		return
	}
	object.InvalidEndpoints.WithLabelValues(object.ReasonSource).Add(float64(len(problems)))
	log.Warningf("%s %s/%s: %s; skipped, the rest of it is served", kind, ns, name, msg)
	c.b.Report(&object.Object{Kind: kind, Namespace: ns, Name: name}, "InvalidEndpoint", msg+"; skipped, the rest of it is served")
}

// use records what the derivation of key read.
func (c *cluster) use(key string, uses []string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.deps.use(key, uses)
}

// Ready implements world.
func (c *cluster) Ready(namespace, name string) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, s := range c.sliceIdx[serviceRef{namespace, name}] {
		if s.Ready {
			return true
		}
	}
	return false
}

// sliceChanged is the newest change among Service namespace/name's EndpointSlices.
func (c *cluster) sliceChanged(namespace, name string) time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	var t time.Time
	for _, s := range c.sliceIdx[serviceRef{namespace, name}] {
		if s.Changed.After(t) {
			t = s.Changed
		}
	}
	return t
}

// DefaultIngressClass implements world: the newest class marked default.
func (c *cluster) DefaultIngressClass() string {
	var best *networkingv1.IngressClass
	for _, o := range c.classes.list() {
		ic, ok := o.(*networkingv1.IngressClass)
		if !ok || ic.Annotations[object.AnnotationDefaultClass] != "true" {
			continue
		}
		if best == nil || ic.CreationTimestamp.After(best.CreationTimestamp.Time) ||
			ic.CreationTimestamp.Equal(&best.CreationTimestamp) && ic.Name < best.Name {
			best = ic
		}
	}
	if best == nil {
		return ""
	}
	return best.Name
}

// Gateway implements world.
func (c *cluster) Gateway(namespace, name string) *gatewayv1.Gateway {
	c.mu.Lock()
	w := c.kinds[object.KindGateway]
	c.mu.Unlock()
	g, _ := w.get(namespace, name).(*gatewayv1.Gateway)
	return g
}

// objectRef names an object for its Events.
func objectRef(o *object.Object) kube.Ref {
	switch o.Kind {
	case object.KindIngress:
		return kube.Ref{APIVersion: "networking.k8s.io/v1", Kind: o.Kind, Namespace: o.Namespace, Name: o.Name, UID: o.UID}
	case object.KindService:
		return kube.Ref{APIVersion: "v1", Kind: o.Kind, Namespace: o.Namespace, Name: o.Name, UID: o.UID}
	case object.KindHTTPRoute, object.KindGRPCRoute, object.KindTLSRoute:
		return kube.Ref{APIVersion: gatewayv1.GroupVersion.String(), Kind: o.Kind, Namespace: o.Namespace, Name: o.Name, UID: o.UID}
	case object.KindGslb:
		return kube.Ref{APIVersion: object.GslbGroup + "/" + object.GslbVersion, Kind: object.KindGslb, Namespace: o.Namespace, Name: o.Name, UID: o.UID}
	case object.KindGslbLegacy:
		return kube.Ref{APIVersion: object.GslbLegacyGroup + "/" + object.GslbVersion, Kind: object.KindGslb, Namespace: o.Namespace, Name: o.Name, UID: o.UID}
	}
	return dnsEndpointRef(o)
}

// watchError logs a failing list or watch of resource once per distinct
// error (the reflector retries with backoff) and counts every failure.
func watchError(resource, ns string) cache.WatchErrorHandler {
	where := "all namespaces"
	if ns != "" {
		where = "namespace " + ns
	}
	var mu sync.Mutex
	var last string
	return func(_ *cache.Reflector, err error) {
		object.SyncErrors.WithLabelValues("kubernetes").Inc()
		mu.Lock()
		defer mu.Unlock()
		if err.Error() == last {
			return
		}
		last = err.Error()
		if apierrors.IsForbidden(err) {
			log.Errorf("Forbidden to list/watch %s in %s: grant this identity get, list and watch on it; serving the last data: %v", resource, where, err)
			return
		}
		log.Warningf("List/watch of %s in %s failed, retrying; serving the last data: %v", resource, where, err)
	}
}

// reportSkipped reports on a derived object, as Events, what of it the
// derivation did not take and why (skippedNames; unserved: what the
// derivation handed to cfg.names.unserved): the API feed's side of
// what the lint prints. The eventer bounds them (per object, per namespace,
// de-duplicated), as it bounds refusals.
func (c *cluster) reportSkipped(kind string, obj any, d *derive.Declared, unserved []derive.UnservedName) {
	if object.IsGslbKind(kind) {
		return
	}
	notes := derive.SkippedNames(kind, obj, d, unserved, &c.cfg.Options, c)
	if len(notes) == 0 {
		return
	}
	m, err := meta.Accessor(obj)
	if err != nil {
		return
	}
	o := &object.Object{Kind: kind, Namespace: m.GetNamespace(), Name: m.GetName(), UID: string(m.GetUID())}
	for _, n := range notes {
		if n.Zone || n.LintOnly {
			continue
		}
		c.b.Report(o, derive.EventNameSkipped, n.Msg+"; not served")
	}
}
