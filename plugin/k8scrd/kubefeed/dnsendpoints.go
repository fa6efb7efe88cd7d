package kubefeed

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync"

	"github.com/fleetdns/fleetdns/plugin/k8scrd/object"

	"github.com/fleetdns/fleetdns/plugin/k8scrd/kube"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/serializer"
	clientset "k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/clientcmd"
	"sigs.k8s.io/external-dns/apis/v1alpha1"
)

// resource names the API resource in log lines.
const resource = "dnsendpoints.externaldns.k8s.io"

// Feed is the API feed: the source that watches DNSEndpoint objects through client-go
// informers: read only (list, watch), one informer per namespace (or one for
// all). While the API server is away the informers keep their last data, so
// the store keeps serving it, and they catch up when it returns.
type Feed struct {
	cfg *Config
	b   object.Sink

	cancel context.CancelFunc
	wg     sync.WaitGroup

	events *kube.Eventer // Events on objects: refused claims, invalid endpoints

	// owners holds k8gb's DNSEndpoints back while their Gslb is served
	// (derive/gslb.go); nil without resources Gslb.
	owners *gslbOwners

	errMu   sync.Mutex
	lastErr map[string]string // namespace -> last list/watch error logged
}

func New(cfg *Config, b object.Sink) *Feed {
	return &Feed{cfg: cfg, b: b, lastErr: map[string]string{}}
}

// restConfig: the kubeconfig named in the Corefile, else in-cluster, else $KUBECONFIG (or ~/.kube/config).
func (k *Feed) restConfig() (*rest.Config, error) {
	if k.cfg.Kubeconfig != "" {
		rules := &clientcmd.ClientConfigLoadingRules{ExplicitPath: k.cfg.Kubeconfig}
		overrides := &clientcmd.ConfigOverrides{CurrentContext: k.cfg.Context}
		return clientcmd.NewNonInteractiveDeferredLoadingClientConfig(rules, overrides).ClientConfig()
	}
	if c, err := rest.InClusterConfig(); err == nil {
		return c, nil
	}
	rules := clientcmd.NewDefaultClientConfigLoadingRules()
	c, err := clientcmd.NewNonInteractiveDeferredLoadingClientConfig(rules, &clientcmd.ConfigOverrides{}).ClientConfig()
	if err != nil {
		return nil, fmt.Errorf("no in-cluster config and no usable $KUBECONFIG: %w", err)
	}
	return c, nil
}

// restClient is a typed REST client for externaldns.k8s.io/v1alpha1 with our
// own scheme: there is no generated clientset for DNSEndpoint.
func restClient(c *rest.Config) (*rest.RESTClient, error) {
	scheme := runtime.NewScheme()
	if err := v1alpha1.AddToScheme(scheme); err != nil {
		return nil, err
	}
	metav1.AddToGroupVersion(scheme, v1alpha1.GroupVersion)
	cc := rest.CopyConfig(c)
	gv := v1alpha1.GroupVersion
	cc.GroupVersion = &gv
	cc.APIPath = "/apis"
	cc.ContentType = runtime.ContentTypeJSON
	cc.NegotiatedSerializer = serializer.NewCodecFactory(scheme).WithoutConversion()
	if cc.UserAgent == "" {
		cc.UserAgent = "coredns-k8scrd"
	}
	return rest.RESTClientFor(cc)
}

func (k *Feed) Start() error {
	rc, err := k.restConfig()
	if err != nil {
		return fmt.Errorf("kubernetes: %w", err)
	}
	client, err := restClient(rc)
	if err != nil {
		return fmt.Errorf("kubernetes: %w", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	k.cancel = cancel
	// Events: the one write. Started before the informers, so that the
	// first listing's refusals are reported.
	cs, err := clientset.NewForConfig(rc)
	if err != nil {
		cancel()
		return fmt.Errorf("kubernetes: %w", err)
	}
	k.events = kube.NewEventer(cs.CoreV1())
	k.b.SetReporter(func(o *object.Object, reason, message string) { k.events.Report(objectRef(o), reason, message) })
	k.wg.Add(1)
	go func() {
		defer k.wg.Done()
		k.events.Run(ctx)
	}()

	if k.cfg.serves(object.KindGslb) {
		k.owners = newGslbOwners(k.b)
	}
	var synced []cache.InformerSynced
	if k.cfg.serves(object.KindDNSEndpoint) {
		if synced, err = k.watchDNSEndpoints(ctx, client); err != nil {
			cancel()
			return err
		}
	}
	if slices.ContainsFunc(k.cfg.Resources, func(r string) bool { return r != object.KindDNSEndpoint }) {
		c, err := newCluster(k.cfg, k.b, rc)
		if err != nil {
			cancel()
			return fmt.Errorf("kubernetes: %w", err)
		}
		c.owners = k.owners
		s, err := c.start(ctx, &k.wg)
		if err != nil {
			cancel()
			return fmt.Errorf("kubernetes: %w", err)
		}
		synced = append(synced, s)
	}
	k.wg.Add(1)
	go func() {
		defer k.wg.Done()
		// Every object of the first listing has reached the builder: mark the sync.
		if cache.WaitForCacheSync(ctx.Done(), synced...) {
			k.recovered()
			log.Infof("First sync of %s from %s done", strings.Join(k.cfg.Resources, ", "), rc.Host)
			k.b.Synced()
		}
	}()
	return nil
}

// watchDNSEndpoints starts the DNSEndpoint informers: one per namespace, or one for all.
func (k *Feed) watchDNSEndpoints(ctx context.Context, client *rest.RESTClient) ([]cache.InformerSynced, error) {
	namespaces := k.cfg.Namespaces
	if len(namespaces) == 0 {
		namespaces = []string{metav1.NamespaceAll}
	}
	var synced []cache.InformerSynced
	for _, ns := range namespaces {
		lw := cache.NewFilteredListWatchFromClient(client, "dnsendpoints", ns, func(o *metav1.ListOptions) {
			o.LabelSelector = k.cfg.Labels
		})
		inf := cache.NewSharedIndexInformer(lw, &v1alpha1.DNSEndpoint{}, 0, cache.Indexers{})
		if err := inf.SetTransform(k.Transform); err != nil {
			return nil, err
		}
		if err := inf.SetWatchErrorHandler(k.watchError(ns)); err != nil {
			return nil, err
		}
		reg, err := inf.AddEventHandler(cache.ResourceEventHandlerFuncs{
			AddFunc:    k.add,
			UpdateFunc: k.update,
			DeleteFunc: k.delete,
		})
		if err != nil {
			return nil, err
		}
		synced = append(synced, reg.HasSynced)
		k.wg.Add(1)
		go func() {
			defer k.wg.Done()
			inf.RunWithContext(ctx)
		}()
	}
	return synced, nil
}

func (k *Feed) Stop() {
	if k.cancel != nil {
		k.cancel()
		k.wg.Wait()
		k.cancel = nil
	}
}

// Cached is what the informer keeps of a DNSEndpoint: the names that key
// it and its version, and the object converted for the builder, which the
// builder shares. The endpoints as the API wrote them are not kept: at
// scale they were a fifth of the memory, and nothing reads them again.
type Cached struct {
	metav1.TypeMeta
	metav1.ObjectMeta // name, namespace and resourceVersion only
	Obj               *object.Object
	bad               []object.Invalid // endpoints skipped, for add to count and log
	owner             string           // the uid of the Gslb controlling it, when k8gb's operator wrote it
}

// DeepCopyObject implements runtime.Object; what cached points to is immutable.
func (c *Cached) DeepCopyObject() runtime.Object {
	cp := *c
	return &cp
}

// Transform converts a DNSEndpoint as it arrives, so that the cache keeps
// only what is served. The change time is the newest managedFields entry
// (the API server stamps it on every write), else creationTimestamp; both
// have second precision. Anything else (an object transformed already, a
// tombstone) passes as it is.
func (k *Feed) Transform(obj any) (any, error) {
	ep, ok := obj.(*v1alpha1.DNSEndpoint)
	if !ok {
		return obj, nil
	}
	t := ep.CreationTimestamp.Time
	for _, mf := range ep.ManagedFields {
		if mf.Time != nil && mf.Time.After(t) {
			t = mf.Time.Time
		}
	}
	o, bad := object.New(object.Meta{
		Key: ep.Namespace + "/" + ep.Name, Namespace: ep.Namespace, Name: ep.Name, UID: string(ep.UID),
		Created: ep.CreationTimestamp.Time, Changed: t, Labels: ep.Labels, Version: resourceVersion(ep),
	}, ep.Spec.Endpoints, k.cfg.Zones, k.cfg.TTL)
	return &Cached{
		ObjectMeta: metav1.ObjectMeta{Name: ep.Name, Namespace: ep.Namespace, ResourceVersion: ep.ResourceVersion},
		Obj:        o, bad: bad, owner: k8gbController(&ep.ObjectMeta),
	}, nil
}

// recovered notes that list/watch works again after logged errors, so the
// next failure is logged again.
func (k *Feed) recovered() {
	k.errMu.Lock()
	defer k.errMu.Unlock()
	if len(k.lastErr) > 0 {
		log.Infof("List/watch of %s works again", resource)
		clear(k.lastErr)
	}
}

func (k *Feed) add(obj any) {
	c, ok := obj.(*Cached)
	if !ok {
		return
	}
	k.recovered()
	for _, b := range c.bad {
		object.InvalidEndpoints.WithLabelValues(b.Reason).Inc()
		if b.Reason != object.ReasonZone {
			log.Warningf("DNSEndpoint %s (resourceVersion %s): %s; skipped", c.Obj.Key, c.ResourceVersion, b.Msg)
			k.events.Report(objectRef(c.Obj), "InvalidEndpoint", b.Msg+"; skipped, the object's other endpoints are served")
		}
	}
	if k.owners != nil {
		k.owners.upsert(c.Obj, c.owner)
		return
	}
	k.b.Upsert(c.Obj)
}

func (k *Feed) update(old, obj any) {
	o, ok1 := old.(*Cached)
	n, ok2 := obj.(*Cached)
	if ok1 && ok2 && o.ResourceVersion == n.ResourceVersion {
		return // a resync or relist of the same version: nothing changed
	}
	k.add(obj)
}

func (k *Feed) delete(obj any) {
	k.recovered()
	if d, ok := obj.(cache.DeletedFinalStateUnknown); ok {
		obj = d.Obj
	}
	if c, ok := obj.(*Cached); ok {
		// A watch's DELETED event carries the deletion's resourceVersion;
		// a deletion missed during a relist the object's last one.
		if k.owners != nil {
			k.owners.remove(c.Obj.Key, resourceVersion(c))
			return
		}
		k.b.RemoveAt(c.Obj.Key, resourceVersion(c))
	}
}

// resourceVersion is an object's resourceVersion as a number: the etcd
// revision of its last write (kube-apiserver's, opaque by contract but
// numeric in every conformant server); 0 when it is not a number.
func resourceVersion(o metav1.Object) uint64 {
	v, _ := strconv.ParseUint(o.GetResourceVersion(), 10, 64)
	return v
}

// watchError logs a failing list or watch once per distinct error (the
// reflector retries with backoff) and counts every failure.
func (k *Feed) watchError(ns string) cache.WatchErrorHandler {
	where := "all namespaces"
	if ns != "" {
		where = "namespace " + ns
	}
	return func(r *cache.Reflector, err error) {
		object.SyncErrors.WithLabelValues("kubernetes").Inc()
		var msg string
		switch {
		case apierrors.IsForbidden(err):
			msg = fmt.Sprintf("Forbidden to list/watch %s in %s: grant this identity get, list and watch on it (ClusterRole or Role); serving the last data: %v", resource, where, err)
		case apierrors.IsNotFound(err):
			msg = fmt.Sprintf("Listing %s in %s: not found: is the DNSEndpoint CRD installed? Serving the last data: %v", resource, where, err)
		default:
			msg = fmt.Sprintf("List/watch of %s in %s failed, retrying; serving the last data: %v", resource, where, err)
		}
		k.errMu.Lock()
		defer k.errMu.Unlock()
		if k.lastErr[ns] == err.Error() {
			return
		}
		k.lastErr[ns] = err.Error()
		if apierrors.IsForbidden(err) || apierrors.IsNotFound(err) {
			log.Error(msg)
		} else {
			log.Warning(msg)
		}
	}
}

// dnsEndpointRef names a DNSEndpoint for its Events.
func dnsEndpointRef(o *object.Object) kube.Ref {
	return kube.Ref{APIVersion: v1alpha1.GroupVersion.String(), Kind: "DNSEndpoint", Namespace: o.Namespace, Name: o.Name, UID: o.UID}
}
