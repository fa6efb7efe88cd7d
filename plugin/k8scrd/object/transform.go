package object

import (
	"strings"
	"time"
	"unique"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	networkingv1 "k8s.io/api/networking/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
)

// The informer transforms: what the caches keep of the core kinds is what
// the derivations read, as CoreDNS's kubernetes/object.ToService does. An
// object that declares nothing (a ClusterIP Service, an Ingress with large
// annotations of other tools) costs its name, labels and a few words.
// Each function may be given an object it has already cut down.

// Trim is the informers' transform: one function per kind; anything else
// loses its managedFields and its last-applied-configuration.
func Trim(obj any) (any, error) {
	switch o := obj.(type) {
	case *discoveryv1.EndpointSlice:
		return trimSlice(o), nil
	case *networkingv1.Ingress:
		return compactIngress(TrimIngress(o)), nil
	case *corev1.Service:
		return TrimService(o), nil
	case *networkingv1.IngressClass:
		return TrimIngressClass(o), nil
	}
	if m, err := meta.Accessor(obj); err == nil {
		m.SetManagedFields(nil)
		if a := m.GetAnnotations(); a[corev1.LastAppliedConfigAnnotation] != "" {
			kept := make(map[string]string, len(a)-1)
			for k, v := range a {
				if k != corev1.LastAppliedConfigAnnotation {
					kept[k] = v
				}
			}
			m.SetAnnotations(kept)
		}
	}
	return obj, nil
}

// trimMeta keeps of m its identity (the namespace interned: one copy per
// namespace, not per object), its times (the change time as the one
// managedFields entry lbDeclared reads), its labels (Gslb label selectors
// and the k8gb owner labels read them) and the annotations the derivations
// read (readAnnotation).
func trimMeta(m *metav1.ObjectMeta) metav1.ObjectMeta {
	out := metav1.ObjectMeta{
		Name: m.Name, Namespace: unique.Make(m.Namespace).Value(), UID: m.UID, ResourceVersion: m.ResourceVersion,
		Generation: m.Generation, CreationTimestamp: m.CreationTimestamp, DeletionTimestamp: m.DeletionTimestamp,
		Labels: m.Labels,
	}
	var newest *metav1.Time
	for _, mf := range m.ManagedFields {
		if mf.Time != nil && (newest == nil || mf.Time.After(newest.Time)) {
			newest = mf.Time
		}
	}
	if newest != nil {
		out.ManagedFields = []metav1.ManagedFieldsEntry{{Time: newest}}
	}
	for k, v := range m.Annotations {
		if !ReadAnnotation(k) {
			continue
		}
		if out.Annotations == nil {
			out.Annotations = map[string]string{}
		}
		out.Annotations[k] = v
	}
	return out
}

// ReadAnnotation reports whether a derivation reads annotation k: the GSLB
// policy (gslb.fleetdns.io/*), external-dns's hostname and TTL, k8gb's
// (k8gb.io/*), the legacy Ingress class and the default IngressClass mark,
// and k8s_gateway's hostname and endpoints annotations (derive/names.go).
func ReadAnnotation(k string) bool {
	switch k {
	case AnnotationIngressClass, AnnotationDefaultClass, AnnotationHostname, AnnotationTTL,
		AnnotationK8sGatewayHostname, AnnotationK8sGatewayEndpoints:
		return true
	}
	return strings.HasPrefix(k, GslbAnnotations) || strings.HasPrefix(k, "k8gb.io/")
}

// TrimIngress keeps the class, the rules' hosts and Service backends, the
// TLS hosts, the default backend's Service and the load balancer's
// addresses and host names.
func TrimIngress(ing *networkingv1.Ingress) *networkingv1.Ingress {
	out := &networkingv1.Ingress{TypeMeta: ing.TypeMeta, ObjectMeta: trimMeta(&ing.ObjectMeta)}
	out.Spec.IngressClassName = ing.Spec.IngressClassName
	if b := ing.Spec.DefaultBackend; b != nil {
		out.Spec.DefaultBackend = &networkingv1.IngressBackend{Service: trimBackend(b.Service)}
	}
	if len(ing.Spec.Rules) > 0 {
		out.Spec.Rules = make([]networkingv1.IngressRule, len(ing.Spec.Rules))
		for i, r := range ing.Spec.Rules {
			out.Spec.Rules[i].Host = r.Host
			if r.HTTP == nil {
				continue
			}
			var paths []networkingv1.HTTPIngressPath
			for _, p := range r.HTTP.Paths {
				if s := trimBackend(p.Backend.Service); s != nil {
					paths = append(paths, networkingv1.HTTPIngressPath{Backend: networkingv1.IngressBackend{Service: s}})
				}
			}
			out.Spec.Rules[i].HTTP = &networkingv1.HTTPIngressRuleValue{Paths: paths}
		}
	}
	for _, t := range ing.Spec.TLS {
		if len(t.Hosts) > 0 {
			out.Spec.TLS = append(out.Spec.TLS, networkingv1.IngressTLS{Hosts: t.Hosts})
		}
	}
	for _, lb := range ing.Status.LoadBalancer.Ingress {
		out.Status.LoadBalancer.Ingress = append(out.Status.LoadBalancer.Ingress, networkingv1.IngressLoadBalancerIngress{IP: lb.IP, Hostname: lb.Hostname})
	}
	return out
}

// CachedIngress is what the cache keeps of an Ingress: what trimIngress
// keeps, without the room of the API types around it (less than half the
// bytes: there is one per Ingress host). ingress gives the derivations the
// API type again, built afresh for each derivation.
type CachedIngress struct {
	cacheMeta
	uid         types.UID
	generation  int64
	created     metav1.Time
	deleted     *metav1.Time
	changed     *metav1.Time // the newest managedFields time (trimMeta)
	labels      map[string]string
	annotations map[string]string
	class       *string
	// defaultBackend: the Ingress has one; defaultService is its Service ("" none).
	defaultBackend bool
	defaultService string
	rules          []cachedRule
	tls            [][]string
	lb             []cachedLB
}

// cachedRule is one rule: its host and its paths' Services (http: it has
// an http block).
type cachedRule struct {
	host     string
	http     bool
	services []string
}

// cachedLB is one load balancer status entry.
type cachedLB struct{ ip, hostname string }

// compactIngress is ing, as trimIngress returns it, in the cache's form.
func compactIngress(ing *networkingv1.Ingress) *CachedIngress {
	c := &CachedIngress{
		cacheMeta:   cacheMeta{Namespace: ing.Namespace, Name: ing.Name, version: ing.ResourceVersion},
		uid:         ing.UID,
		generation:  ing.Generation,
		created:     ing.CreationTimestamp,
		deleted:     ing.DeletionTimestamp,
		labels:      ing.Labels,
		annotations: ing.Annotations,
		class:       ing.Spec.IngressClassName,
	}
	if len(ing.ManagedFields) > 0 {
		c.changed = ing.ManagedFields[0].Time
	}
	if b := ing.Spec.DefaultBackend; b != nil {
		c.defaultBackend = true
		if b.Service != nil {
			c.defaultService = b.Service.Name
		}
	}
	if len(ing.Spec.Rules) > 0 {
		c.rules = make([]cachedRule, len(ing.Spec.Rules))
		for i, r := range ing.Spec.Rules {
			c.rules[i] = cachedRule{host: r.Host, http: r.HTTP != nil}
			if r.HTTP == nil {
				continue
			}
			for _, p := range r.HTTP.Paths {
				c.rules[i].services = append(c.rules[i].services, p.Backend.Service.Name)
			}
		}
	}
	for _, t := range ing.Spec.TLS {
		c.tls = append(c.tls, t.Hosts)
	}
	for _, lb := range ing.Status.LoadBalancer.Ingress {
		c.lb = append(c.lb, cachedLB{ip: lb.IP, hostname: lb.Hostname})
	}
	return c
}

// ingress is the Ingress c holds, as trimIngress returned it.
func (c *CachedIngress) ingress() *networkingv1.Ingress {
	ing := &networkingv1.Ingress{ObjectMeta: metav1.ObjectMeta{
		Name: c.Name, Namespace: c.Namespace, UID: c.uid, ResourceVersion: c.version, Generation: c.generation,
		CreationTimestamp: c.created, DeletionTimestamp: c.deleted, Labels: c.labels, Annotations: c.annotations,
	}}
	if c.changed != nil {
		ing.ManagedFields = []metav1.ManagedFieldsEntry{{Time: c.changed}}
	}
	ing.Spec.IngressClassName = c.class
	if c.defaultBackend {
		ing.Spec.DefaultBackend = &networkingv1.IngressBackend{}
		if c.defaultService != "" {
			ing.Spec.DefaultBackend.Service = &networkingv1.IngressServiceBackend{Name: c.defaultService}
		}
	}
	if len(c.rules) > 0 {
		ing.Spec.Rules = make([]networkingv1.IngressRule, len(c.rules))
		for i, r := range c.rules {
			ing.Spec.Rules[i].Host = r.host
			if !r.http {
				continue
			}
			var paths []networkingv1.HTTPIngressPath
			for _, s := range r.services {
				paths = append(paths, networkingv1.HTTPIngressPath{Backend: networkingv1.IngressBackend{Service: &networkingv1.IngressServiceBackend{Name: s}}})
			}
			ing.Spec.Rules[i].HTTP = &networkingv1.HTTPIngressRuleValue{Paths: paths}
		}
	}
	for _, hosts := range c.tls {
		ing.Spec.TLS = append(ing.Spec.TLS, networkingv1.IngressTLS{Hosts: hosts})
	}
	for _, lb := range c.lb {
		ing.Status.LoadBalancer.Ingress = append(ing.Status.LoadBalancer.Ingress, networkingv1.IngressLoadBalancerIngress{IP: lb.ip, Hostname: lb.hostname})
	}
	return ing
}

func (c *CachedIngress) GetUID() types.UID                  { return c.uid }
func (c *CachedIngress) GetLabels() map[string]string       { return c.labels }
func (c *CachedIngress) GetAnnotations() map[string]string  { return c.annotations }
func (c *CachedIngress) GetCreationTimestamp() metav1.Time  { return c.created }
func (c *CachedIngress) GetDeletionTimestamp() *metav1.Time { return c.deleted }
func (c *CachedIngress) GetGeneration() int64               { return c.generation }

// DeepCopyObject implements runtime.Object; what the cache holds is never changed.
func (c *CachedIngress) DeepCopyObject() runtime.Object {
	cp := *c
	return &cp
}

// Derivable is the object the derivations read of what a cache holds: the
// API type again for an object kept in a form of our own.
func Derivable(o any) any {
	if c, ok := o.(*CachedIngress); ok {
		return c.ingress()
	}
	return o
}

// trimBackend keeps a backend Service's name.
func trimBackend(s *networkingv1.IngressServiceBackend) *networkingv1.IngressServiceBackend {
	if s == nil || s.Name == "" {
		return nil
	}
	return &networkingv1.IngressServiceBackend{Name: s.Name}
}

// TrimService keeps the type and, of a LoadBalancer, its external IPs and
// its load balancer's addresses and host names. Another type declares nothing (deriveService):
// its metadata stays for the Gslbs that name or select it.
func TrimService(svc *corev1.Service) *corev1.Service {
	out := &corev1.Service{TypeMeta: svc.TypeMeta, ObjectMeta: trimMeta(&svc.ObjectMeta)}
	out.Spec.Type = svc.Spec.Type
	if svc.Spec.Type != corev1.ServiceTypeLoadBalancer {
		return out
	}
	out.Spec.ExternalIPs = svc.Spec.ExternalIPs
	for _, lb := range svc.Status.LoadBalancer.Ingress {
		out.Status.LoadBalancer.Ingress = append(out.Status.LoadBalancer.Ingress, corev1.LoadBalancerIngress{IP: lb.IP, Hostname: lb.Hostname})
	}
	return out
}

// TrimIngressClass keeps the metadata: its name, creation and default mark.
func TrimIngressClass(ic *networkingv1.IngressClass) *networkingv1.IngressClass {
	return &networkingv1.IngressClass{TypeMeta: ic.TypeMeta, ObjectMeta: trimMeta(&ic.ObjectMeta)}
}

// trimSlice cuts an EndpointSlice down to its Service and whether it has a
// ready endpoint. Its namespace is interned: every slice of a namespace
// shares one copy.
func trimSlice(s *discoveryv1.EndpointSlice) *ReadySlice {
	changed := s.CreationTimestamp.Time
	for _, mf := range s.ManagedFields {
		if mf.Time != nil && mf.Time.After(changed) {
			changed = mf.Time.Time
		}
	}
	return &ReadySlice{
		cacheMeta: cacheMeta{Namespace: unique.Make(s.Namespace).Value(), Name: s.Name, version: s.ResourceVersion},
		Service:   s.Labels[LabelServiceName],
		Ready:     SliceReady(s),
		Changed:   changed,
	}
}

// ReadySlice is what the cache keeps of an EndpointSlice: a third of the
// size of an empty ObjectMeta (there are as many slices as Services).
type ReadySlice struct {
	cacheMeta
	Service string
	Ready   bool
	Changed time.Time // the newest managedFields time: when its readiness may have changed
}

// DeepCopyObject implements runtime.Object; readySlice is immutable.
func (s *ReadySlice) DeepCopyObject() runtime.Object {
	cp := *s
	return &cp
}

// cacheMeta is the identity an informer's cache needs of an object kept in
// a type of our own (namespace, name, resourceVersion); the rest of
// metav1.Object is empty, as in CoreDNS's kubernetes/object.Empty.
type cacheMeta struct {
	Namespace, Name, version string
}

func (m *cacheMeta) GetObjectKind() schema.ObjectKind { return schema.EmptyObjectKind }

func (m *cacheMeta) GetNamespace() string                                       { return m.Namespace }
func (m *cacheMeta) SetNamespace(ns string)                                     { m.Namespace = ns }
func (m *cacheMeta) GetName() string                                            { return m.Name }
func (m *cacheMeta) SetName(name string)                                        { m.Name = name }
func (m *cacheMeta) GetResourceVersion() string                                 { return m.version }
func (m *cacheMeta) SetResourceVersion(v string)                                { m.version = v }
func (m *cacheMeta) GetGenerateName() string                                    { return "" }
func (m *cacheMeta) SetGenerateName(string)                                     {}
func (m *cacheMeta) GetUID() types.UID                                          { return "" }
func (m *cacheMeta) SetUID(types.UID)                                           {}
func (m *cacheMeta) GetGeneration() int64                                       { return 0 }
func (m *cacheMeta) SetGeneration(int64)                                        {}
func (m *cacheMeta) GetSelfLink() string                                        { return "" }
func (m *cacheMeta) SetSelfLink(string)                                         {}
func (m *cacheMeta) GetCreationTimestamp() metav1.Time                          { return metav1.Time{} }
func (m *cacheMeta) SetCreationTimestamp(metav1.Time)                           {}
func (m *cacheMeta) GetDeletionTimestamp() *metav1.Time                         { return nil }
func (m *cacheMeta) SetDeletionTimestamp(*metav1.Time)                          {}
func (m *cacheMeta) GetDeletionGracePeriodSeconds() *int64                      { return nil }
func (m *cacheMeta) SetDeletionGracePeriodSeconds(*int64)                       {}
func (m *cacheMeta) GetLabels() map[string]string                               { return nil }
func (m *cacheMeta) SetLabels(map[string]string)                                {}
func (m *cacheMeta) GetAnnotations() map[string]string                          { return nil }
func (m *cacheMeta) SetAnnotations(map[string]string)                           {}
func (m *cacheMeta) GetFinalizers() []string                                    { return nil }
func (m *cacheMeta) SetFinalizers([]string)                                     {}
func (m *cacheMeta) GetOwnerReferences() []metav1.OwnerReference                { return nil }
func (m *cacheMeta) SetOwnerReferences([]metav1.OwnerReference)                 {}
func (m *cacheMeta) GetManagedFields() []metav1.ManagedFieldsEntry              { return nil }
func (m *cacheMeta) SetManagedFields(managedFields []metav1.ManagedFieldsEntry) {}
