package object

import (
	"maps"

	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
)

// GslbObject is what k8scrd reads of a Gslb (either group: their fields agree).
type GslbObject struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`
	Spec              GslbSpec `json:"spec,omitempty"`
}

type GslbSpec struct {
	Ingress             GslbIngressSpec `json:"ingress,omitempty"`
	Strategy            GslbStrategy    `json:"strategy"`
	ResourceRef         GslbResourceRef `json:"resourceRef,omitempty"`
	ServiceHealthPolicy string          `json:"serviceHealthPolicy,omitempty"`
}

// GslbIngressSpec is k8gb's embedded Ingress spec (its default backend is "backend").
type GslbIngressSpec struct {
	IngressClassName *string                      `json:"ingressClassName,omitempty"`
	DefaultBackend   *networkingv1.IngressBackend `json:"backend,omitempty"`
	TLS              []networkingv1.IngressTLS    `json:"tls,omitempty"`
	Rules            []networkingv1.IngressRule   `json:"rules,omitempty"`
}

type GslbStrategy struct {
	Type          string         `json:"type"`
	Weight        map[string]int `json:"weight,omitempty"`
	PrimaryGeoTag string         `json:"primaryGeoTag,omitempty"`
	DNSTtlSeconds int            `json:"dnsTtlSeconds,omitempty"`
}

// GslbResourceRef is an ObjectReference and a LabelSelector, inline.
type GslbResourceRef struct {
	APIVersion       string                            `json:"apiVersion,omitempty"`
	Kind             string                            `json:"kind,omitempty"`
	Namespace        string                            `json:"namespace,omitempty"`
	Name             string                            `json:"name,omitempty"`
	MatchLabels      map[string]string                 `json:"matchLabels,omitempty"`
	MatchExpressions []metav1.LabelSelectorRequirement `json:"matchExpressions,omitempty"`
}

func (r *GslbResourceRef) Empty() bool {
	return r.Kind == "" && r.Name == "" && r.APIVersion == "" && len(r.MatchLabels) == 0 && len(r.MatchExpressions) == 0
}

// gslbFromUnstructured reads a Gslb as the dynamic informer holds it.
func gslbFromUnstructured(u *unstructured.Unstructured) (*GslbObject, error) {
	g := &GslbObject{}
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, g); err != nil {
		return nil, err
	}
	return g, nil
}

// --- What the API feed (kubefeed) caches of a Gslb ---

// TrimGslb converts a Gslb as it arrives into what the derivation reads;
// its status (which k8gb's operator wrote) is never read.
func TrimGslb(obj any) (any, error) {
	u, ok := obj.(*unstructured.Unstructured)
	if !ok {
		return obj, nil
	}
	g, err := gslbFromUnstructured(u)
	if err != nil {
		// Kept as it came: the derivation reports it.
		return Trim(obj)
	}
	g.ManagedFields = gslbLastChange(g.ManagedFields)
	if a := g.Annotations; a[corev1.LastAppliedConfigAnnotation] != "" {
		a = maps.Clone(a)
		delete(a, corev1.LastAppliedConfigAnnotation)
		g.Annotations = a
	}
	return g, nil
}

// gslbLastChange keeps, of the managedFields, the newest time only (the
// change time the derivation reads).
func gslbLastChange(mfs []metav1.ManagedFieldsEntry) []metav1.ManagedFieldsEntry {
	var newest *metav1.Time
	for _, mf := range mfs {
		if mf.Time != nil && (newest == nil || mf.Time.After(newest.Time)) {
			newest = mf.Time
		}
	}
	if newest == nil {
		return nil
	}
	return []metav1.ManagedFieldsEntry{{Time: newest}}
}

// DeepCopyObject implements runtime.Object; what the cache holds is never changed.
func (g *GslbObject) DeepCopyObject() runtime.Object {
	cp := *g
	return &cp
}
