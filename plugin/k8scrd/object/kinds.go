package object

import (
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	gatewayv1 "sigs.k8s.io/gateway-api/apis/v1"
)

// The kinds that `resources` names: the sources of the store. DNSEndpoint
// objects carry records; the others are the cluster's own objects, whose
// hosts, targets and health k8scrd derives (docs/architecture.md, and this plugin's README).
const (
	KindDNSEndpoint = "DNSEndpoint"
	KindIngress     = "Ingress"
	KindService     = "Service"
	KindHTTPRoute   = "HTTPRoute"
	KindGRPCRoute   = "GRPCRoute"
	KindTLSRoute    = "TLSRoute"
)

// Kinds are the words `resources` accepts, in the order the README lists them.
var Kinds = []string{KindDNSEndpoint, KindIngress, KindService, KindHTTPRoute, KindGRPCRoute, KindTLSRoute, KindGslb}

// Annotations the sources read.
const (
	// AnnotationHostname lists a Service's hosts, comma separated (external-dns's convention).
	AnnotationHostname = "external-dns.alpha.kubernetes.io/hostname"
	// AnnotationTTL is the records' TTL in seconds (external-dns's convention).
	AnnotationTTL = "external-dns.alpha.kubernetes.io/ttl"
	// AnnotationIngressClass is the legacy class of an Ingress without ingressClassName.
	AnnotationIngressClass = "kubernetes.io/ingress.class"
	// AnnotationDefaultClass marks the default IngressClass.
	AnnotationDefaultClass = "ingressclass.kubernetes.io/is-default-class"
	// GslbAnnotations prefixes the GSLB policy of an object: gslb.fleetdns.io/strategy
	// is the DNSEndpoint property gslb/strategy, and so on for every name.
	GslbAnnotations = "gslb.fleetdns.io/"
	// LabelServiceName ties an EndpointSlice to its Service.
	LabelServiceName = "kubernetes.io/service-name"
)

const (
	// KindGslb is a Gslb of k8gb.io/v1beta1 (the word of `resources`).
	KindGslb = "Gslb"
	// KindGslbLegacy is a Gslb of the legacy group k8gb.absa.oss/v1beta1:
	// served under `resources Gslb` too. Its name is kubectl's kind.group.
	KindGslbLegacy = "Gslb.k8gb.absa.oss"
	// KindTCPRoute and kindUDPRoute are read only as a Gslb's resourceRef:
	// they carry no host names, the Gslb's k8gb.io/hostname annotation does.
	KindTCPRoute = "TCPRoute"
	KindUDPRoute = "UDPRoute"
	// KindVirtualService (Istio) is a resourceRef k8gb reads and k8scrd does not.
	KindVirtualService = "VirtualService"
)

// k8gb's names.
const (
	GslbGroup       = "k8gb.io"
	GslbLegacyGroup = "k8gb.absa.oss"
	GslbVersion     = "v1beta1"

	// AnnotationExposedIPs and annotationExposedHostnames replace a Gslb's
	// targets (comma lists), as in k8gb; the host names are resolved.
	AnnotationExposedIPs       = "k8gb.io/exposed-ip-addresses"
	AnnotationExposedHostnames = "k8gb.io/exposed-hostnames"
	// AnnotationK8gbHostname is the host of a Gslb over a Service, a TCPRoute or a UDPRoute.
	AnnotationK8gbHostname = "k8gb.io/hostname"
	// LabelMigrated marks a legacy Gslb that k8gb migrated to k8gb.io: its twin is served.
	LabelMigrated = "k8gb.io/migrated-to-k8gb-io"
	// LabelDNSType and labelLegacyDNSType mark the DNSEndpoints k8gb's operator writes.
	LabelDNSType       = "k8gb.io/dnstype"
	LabelLegacyDNSType = "k8gb.absa.oss/dnstype"
)

// gslbCRDs are the CRDs of the kinds the Gslb source watches besides the
// Gateway API kinds of gatewayKinds.
var gslbCRDs = map[string]string{
	KindGslb:       "gslbs." + GslbGroup,
	KindGslbLegacy: "gslbs." + GslbLegacyGroup,
	KindTCPRoute:   "tcproutes.gateway.networking.k8s.io",
	KindUDPRoute:   "udproutes.gateway.networking.k8s.io",
}

// GslbRefKinds are the kinds a Gslb may reference that k8scrd serves, and their API groups.
var GslbRefKinds = map[string]string{
	KindIngress:   networkingv1.GroupName,
	KindService:   corev1.GroupName,
	KindHTTPRoute: gatewayv1.GroupName,
	KindGRPCRoute: gatewayv1.GroupName,
	KindTLSRoute:  gatewayv1.GroupName,
	KindTCPRoute:  gatewayv1.GroupName,
	KindUDPRoute:  gatewayv1.GroupName,
}

// CRDName is the CRD that serves kind.
func CRDName(kind string) string {
	if n, ok := GatewayKinds[kind]; ok {
		return n
	}
	return gslbCRDs[kind]
}

func IsGslbKind(kind string) bool { return kind == KindGslb || kind == KindGslbLegacy }

// GatewayKinds are the Gateway API kinds, by the CRD that serves them.
var GatewayKinds = map[string]string{
	KindHTTPRoute: "httproutes.gateway.networking.k8s.io",
	KindGRPCRoute: "grpcroutes.gateway.networking.k8s.io",
	KindTLSRoute:  "tlsroutes.gateway.networking.k8s.io",
	KindGateway:   "gateways.gateway.networking.k8s.io",
}

// KindGateway is not a kind of `resources`: routes' targets come from it.
const KindGateway = "Gateway"

// Kinds a derivation reads besides the derived kinds.
const (
	KindEndpointSlice = "EndpointSlice"
	KindIngressClass  = "IngressClass"
)

// Annotations of k8s_gateway.
const (
	// AnnotationK8sGatewayHostname lists a Service's hosts for k8s_gateway.
	AnnotationK8sGatewayHostname = "coredns.io/hostname"
	// AnnotationK8sGatewayEndpoints ("true") makes k8s_gateway answer a
	// Service's ready pod addresses, for a Service of any type.
	AnnotationK8sGatewayEndpoints = "k8s-gateway.dns/resolve-endpoints"
)

// HostnameAnnotations are the annotations `hostname_annotation` accepts:
// those the informer cache keeps (transform.go, ReadAnnotation).
var HostnameAnnotations = []string{AnnotationK8sGatewayHostname, AnnotationHostname}
