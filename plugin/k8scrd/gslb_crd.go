package k8scrd

import (
	"maps"

	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	gatewayv1 "sigs.k8s.io/gateway-api/apis/v1"
)

const (
	// kindGslb is a Gslb of k8gb.io/v1beta1 (the word of `resources`).
	kindGslb = "Gslb"
	// kindGslbLegacy is a Gslb of the legacy group k8gb.absa.oss/v1beta1:
	// served under `resources Gslb` too. Its name is kubectl's kind.group.
	kindGslbLegacy = "Gslb.k8gb.absa.oss"
	// kindTCPRoute and kindUDPRoute are read only as a Gslb's resourceRef:
	// they carry no host names, the Gslb's k8gb.io/hostname annotation does.
	kindTCPRoute = "TCPRoute"
	kindUDPRoute = "UDPRoute"
	// kindVirtualService (Istio) is a resourceRef k8gb reads and k8scrd does not.
	kindVirtualService = "VirtualService"
)

// k8gb's names.
const (
	gslbGroup       = "k8gb.io"
	gslbLegacyGroup = "k8gb.absa.oss"
	gslbVersion     = "v1beta1"

	// annotationExposedIPs and annotationExposedHostnames replace a Gslb's
	// targets (comma lists), as in k8gb; the host names are resolved.
	annotationExposedIPs       = "k8gb.io/exposed-ip-addresses"
	annotationExposedHostnames = "k8gb.io/exposed-hostnames"
	// annotationK8gbHostname is the host of a Gslb over a Service, a TCPRoute or a UDPRoute.
	annotationK8gbHostname = "k8gb.io/hostname"
	// labelMigrated marks a legacy Gslb that k8gb migrated to k8gb.io: its twin is served.
	labelMigrated = "k8gb.io/migrated-to-k8gb-io"
	// labelDNSType and labelLegacyDNSType mark the DNSEndpoints k8gb's operator writes.
	labelDNSType       = "k8gb.io/dnstype"
	labelLegacyDNSType = "k8gb.absa.oss/dnstype"
)

// gslbCRDs are the CRDs of the kinds the Gslb source watches besides the
// Gateway API kinds of gatewayKinds.
var gslbCRDs = map[string]string{
	kindGslb:       "gslbs." + gslbGroup,
	kindGslbLegacy: "gslbs." + gslbLegacyGroup,
	kindTCPRoute:   "tcproutes.gateway.networking.k8s.io",
	kindUDPRoute:   "udproutes.gateway.networking.k8s.io",
}

// gslbRefKinds are the kinds a Gslb may reference that k8scrd serves, and their API groups.
var gslbRefKinds = map[string]string{
	kindIngress:   networkingv1.GroupName,
	kindService:   corev1.GroupName,
	kindHTTPRoute: gatewayv1.GroupName,
	kindGRPCRoute: gatewayv1.GroupName,
	kindTLSRoute:  gatewayv1.GroupName,
	kindTCPRoute:  gatewayv1.GroupName,
	kindUDPRoute:  gatewayv1.GroupName,
}

// crdName is the CRD that serves kind.
func crdName(kind string) string {
	if n, ok := gatewayKinds[kind]; ok {
		return n
	}
	return gslbCRDs[kind]
}

func isGslbKind(kind string) bool { return kind == kindGslb || kind == kindGslbLegacy }

// gslbObject is what k8scrd reads of a Gslb (either group: their fields agree).
type gslbObject struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`
	Spec              gslbSpec `json:"spec,omitempty"`
}

type gslbSpec struct {
	Ingress             gslbIngressSpec `json:"ingress,omitempty"`
	Strategy            gslbStrategy    `json:"strategy"`
	ResourceRef         gslbResourceRef `json:"resourceRef,omitempty"`
	ServiceHealthPolicy string          `json:"serviceHealthPolicy,omitempty"`
}

// gslbIngressSpec is k8gb's embedded Ingress spec (its default backend is "backend").
type gslbIngressSpec struct {
	IngressClassName *string                      `json:"ingressClassName,omitempty"`
	DefaultBackend   *networkingv1.IngressBackend `json:"backend,omitempty"`
	TLS              []networkingv1.IngressTLS    `json:"tls,omitempty"`
	Rules            []networkingv1.IngressRule   `json:"rules,omitempty"`
}

type gslbStrategy struct {
	Type          string         `json:"type"`
	Weight        map[string]int `json:"weight,omitempty"`
	PrimaryGeoTag string         `json:"primaryGeoTag,omitempty"`
	DNSTtlSeconds int            `json:"dnsTtlSeconds,omitempty"`
}

// gslbResourceRef is an ObjectReference and a LabelSelector, inline.
type gslbResourceRef struct {
	APIVersion       string                            `json:"apiVersion,omitempty"`
	Kind             string                            `json:"kind,omitempty"`
	Namespace        string                            `json:"namespace,omitempty"`
	Name             string                            `json:"name,omitempty"`
	MatchLabels      map[string]string                 `json:"matchLabels,omitempty"`
	MatchExpressions []metav1.LabelSelectorRequirement `json:"matchExpressions,omitempty"`
}

func (r *gslbResourceRef) empty() bool {
	return r.Kind == "" && r.Name == "" && r.APIVersion == "" && len(r.MatchLabels) == 0 && len(r.MatchExpressions) == 0
}

// gslbFromUnstructured reads a Gslb as the dynamic informer holds it.
func gslbFromUnstructured(u *unstructured.Unstructured) (*gslbObject, error) {
	g := &gslbObject{}
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, g); err != nil {
		return nil, err
	}
	return g, nil
}

// --- The API source's wiring (cluster, source_kube.go) ---

// trimGslb converts a Gslb as it arrives into what the derivation reads;
// its status (which k8gb's operator wrote) is never read.
func trimGslb(obj any) (any, error) {
	u, ok := obj.(*unstructured.Unstructured)
	if !ok {
		return obj, nil
	}
	g, err := gslbFromUnstructured(u)
	if err != nil {
		// Kept as it came: the derivation reports it.
		return trim(obj)
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
func (g *gslbObject) DeepCopyObject() runtime.Object {
	cp := *g
	return &cp
}
