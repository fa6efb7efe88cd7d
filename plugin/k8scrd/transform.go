package k8scrd

import (
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	networkingv1 "k8s.io/api/networking/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
)

// The informer transforms: what the caches keep of the core kinds is what
// the derivations read, as CoreDNS's kubernetes/object.ToService does. An
// object that declares nothing (a ClusterIP Service, an Ingress with large
// annotations of other tools) costs its name, labels and a few words.
// Each function may be given an object it has already cut down.

// trim is the informers' transform: one function per kind; anything else
// loses its managedFields and its last-applied-configuration.
func trim(obj any) (any, error) {
	switch o := obj.(type) {
	case *discoveryv1.EndpointSlice:
		return trimSlice(o), nil
	case *networkingv1.Ingress:
		return trimIngress(o), nil
	case *corev1.Service:
		return trimService(o), nil
	case *networkingv1.IngressClass:
		return trimIngressClass(o), nil
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

// trimMeta keeps of m its identity, its times (the change time as the one
// managedFields entry lbDeclared reads), its labels (Gslb label selectors
// and the k8gb owner labels read them) and the annotations the derivations
// read (readAnnotation).
func trimMeta(m *metav1.ObjectMeta) metav1.ObjectMeta {
	out := metav1.ObjectMeta{
		Name: m.Name, Namespace: m.Namespace, UID: m.UID, ResourceVersion: m.ResourceVersion,
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
		if !readAnnotation(k) {
			continue
		}
		if out.Annotations == nil {
			out.Annotations = map[string]string{}
		}
		out.Annotations[k] = v
	}
	return out
}

// readAnnotation reports whether a derivation reads annotation k: the GSLB
// policy (gslb.fleetdns.io/*), external-dns's hostname and TTL, k8gb's
// (k8gb.io/*), the legacy Ingress class and the default IngressClass mark.
func readAnnotation(k string) bool {
	if k == annotationK8sGateway {
		return true // its hosts, when not read, are said skipped (lint_reasons.go)
	}
	switch k {
	case annotationIngressClass, annotationDefaultClass, annotationHostname, annotationTTL:
		return true
	}
	return strings.HasPrefix(k, gslbAnnotations) || strings.HasPrefix(k, "k8gb.io/")
}

// trimIngress keeps the class, the rules' hosts and Service backends, the
// TLS hosts, the default backend's Service and the load balancer's
// addresses and host names.
func trimIngress(ing *networkingv1.Ingress) *networkingv1.Ingress {
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

// trimBackend keeps a backend Service's name.
func trimBackend(s *networkingv1.IngressServiceBackend) *networkingv1.IngressServiceBackend {
	if s == nil || s.Name == "" {
		return nil
	}
	return &networkingv1.IngressServiceBackend{Name: s.Name}
}

// trimService keeps the type and, of a LoadBalancer, its load balancer's
// addresses and host names. Another type declares nothing (deriveService):
// its metadata stays for the Gslbs that name or select it.
func trimService(svc *corev1.Service) *corev1.Service {
	out := &corev1.Service{TypeMeta: svc.TypeMeta, ObjectMeta: trimMeta(&svc.ObjectMeta)}
	out.Spec.Type = svc.Spec.Type
	if svc.Spec.Type != corev1.ServiceTypeLoadBalancer {
		return out
	}
	for _, lb := range svc.Status.LoadBalancer.Ingress {
		out.Status.LoadBalancer.Ingress = append(out.Status.LoadBalancer.Ingress, corev1.LoadBalancerIngress{IP: lb.IP, Hostname: lb.Hostname})
	}
	return out
}

// trimIngressClass keeps the metadata: its name, creation and default mark.
func trimIngressClass(ic *networkingv1.IngressClass) *networkingv1.IngressClass {
	return &networkingv1.IngressClass{TypeMeta: ic.TypeMeta, ObjectMeta: trimMeta(&ic.ObjectMeta)}
}

// trimSlice cuts an EndpointSlice down to its Service and whether it has a
// ready endpoint.
func trimSlice(s *discoveryv1.EndpointSlice) *readySlice {
	changed := s.CreationTimestamp.Time
	for _, mf := range s.ManagedFields {
		if mf.Time != nil && mf.Time.After(changed) {
			changed = mf.Time.Time
		}
	}
	return &readySlice{
		ObjectMeta: metav1.ObjectMeta{Name: s.Name, Namespace: s.Namespace, ResourceVersion: s.ResourceVersion},
		service:    s.Labels[labelServiceName],
		ready:      sliceReady(s),
		changed:    changed,
	}
}

// readySlice is what the cache keeps of an EndpointSlice.
type readySlice struct {
	metav1.TypeMeta
	metav1.ObjectMeta
	service string
	ready   bool
	changed time.Time // the newest managedFields time: when its readiness may have changed
}

// DeepCopyObject implements runtime.Object; readySlice is immutable.
func (s *readySlice) DeepCopyObject() runtime.Object {
	cp := *s
	return &cp
}
