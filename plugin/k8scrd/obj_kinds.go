package k8scrd

import (
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	gatewayv1 "sigs.k8s.io/gateway-api/apis/v1"
)

// The kinds that `resources` names: the sources of the store. DNSEndpoint
// objects carry records; the others are the cluster's own objects, whose
// hosts, targets and health k8scrd derives (docs/architecture.md, and this plugin's README).
const (
	kindDNSEndpoint = "DNSEndpoint"
	kindIngress     = "Ingress"
	kindService     = "Service"
	kindHTTPRoute   = "HTTPRoute"
	kindGRPCRoute   = "GRPCRoute"
	kindTLSRoute    = "TLSRoute"
)

// kinds are the words `resources` accepts, in the order the README lists them.
var kinds = []string{kindDNSEndpoint, kindIngress, kindService, kindHTTPRoute, kindGRPCRoute, kindTLSRoute, kindGslb}

// Annotations the sources read.
const (
	// annotationHostname lists a Service's hosts, comma separated (external-dns's convention).
	annotationHostname = "external-dns.alpha.kubernetes.io/hostname"
	// annotationTTL is the records' TTL in seconds (external-dns's convention).
	annotationTTL = "external-dns.alpha.kubernetes.io/ttl"
	// annotationIngressClass is the legacy class of an Ingress without ingressClassName.
	annotationIngressClass = "kubernetes.io/ingress.class"
	// annotationDefaultClass marks the default IngressClass.
	annotationDefaultClass = "ingressclass.kubernetes.io/is-default-class"
	// gslbAnnotations prefixes the GSLB policy of an object: gslb.fleetdns.io/strategy
	// is the DNSEndpoint property gslb/strategy, and so on for every name.
	gslbAnnotations = "gslb.fleetdns.io/"
	// labelServiceName ties an EndpointSlice to its Service.
	labelServiceName = "kubernetes.io/service-name"
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

// gatewayKinds are the Gateway API kinds, by the CRD that serves them.
var gatewayKinds = map[string]string{
	kindHTTPRoute: "httproutes.gateway.networking.k8s.io",
	kindGRPCRoute: "grpcroutes.gateway.networking.k8s.io",
	kindTLSRoute:  "tlsroutes.gateway.networking.k8s.io",
	kindGateway:   "gateways.gateway.networking.k8s.io",
}

// kindGateway is not a kind of `resources`: routes' targets come from it.
const kindGateway = "Gateway"

// Kinds a derivation reads besides the derived kinds (kindGateway is in source_kube.go).
const (
	kindEndpointSlice = "EndpointSlice"
	kindIngressClass  = "IngressClass"
)

// Annotations of k8s_gateway.
const (
	// annotationK8sGatewayHostname lists a Service's hosts for k8s_gateway.
	annotationK8sGatewayHostname = "coredns.io/hostname"
	// annotationK8sGatewayEndpoints ("true") makes k8s_gateway answer a
	// Service's ready pod addresses, for a Service of any type.
	annotationK8sGatewayEndpoints = "k8s-gateway.dns/resolve-endpoints"
)

// hostnameAnnotations are the annotations `hostname_annotation` accepts:
// those the informer cache keeps (transform.go, readAnnotation).
var hostnameAnnotations = []string{annotationK8sGatewayHostname, annotationHostname}
