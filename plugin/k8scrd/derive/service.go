package derive

import (
	"net/netip"
	"strconv"
	"strings"

	"github.com/fleetdns/fleetdns/plugin/k8scrd/object"

	corev1 "k8s.io/api/core/v1"
)

// deriveService derives what a Service of type LoadBalancer declares: the
// hosts of its hostname annotation (external-dns's, or those
// `hostname_annotation` names) that lie inside the zones, with
// `service_names` NAME.NAMESPACE below every zone when it has no hostname
// annotation, and as targets its spec.externalIPs when it has any (as
// external-dns and k8s_gateway take them), else the addresses and host
// names of its load balancer's status; healthy while the Service itself has
// a ready endpoint. nil: the Service declares nothing (another type, or no
// host inside the zones).
//
// What k8s_gateway would serve of it and the block does not is logged once
// and counted (noteUnserved).
func deriveService(svc *corev1.Service, cfg *Options, w World) *Declared {
	if svc == nil {
		return nil
	}
	var unserved []UnservedName
	defer func() { noteUnserved(cfg, object.KindService, svc.Namespace, svc.Name, unserved) }()
	if svc.Spec.Type != corev1.ServiceTypeLoadBalancer {
		if svc.Annotations[object.AnnotationK8sGatewayEndpoints] == "true" {
			for _, n := range k8sGatewayServiceNames(svc, cfg.Zones) {
				unserved = append(unserved, UnservedName{n, ReasonK8sGatewayEndpoints})
			}
		}
		return nil
	}
	var names, bad []string
	key, value, annotated := cfg.Names.hostnameAnnotation(svc.Annotations)
	if annotated {
		for _, h := range splitHostnames(value) {
			hosts, relative, invalid := cfg.Names.hostNames(h, cfg.Zones)
			switch {
			case invalid && cfg.Names.RelativeHosts:
				bad = append(bad, "annotation "+key+": "+strconv.Quote(h)+" is not a host name")
			case relative && !cfg.Names.RelativeHosts:
				for _, n := range relativeNames(h, cfg.Zones) {
					unserved = append(unserved, UnservedName{n, reasonK8sGatewayRelative})
				}
			}
			names = append(names, hosts...)
		}
	}
	_, k8sGatewayAnnotated := svc.Annotations[object.AnnotationK8sGatewayHostname]
	_, externalDNSAnnotated := svc.Annotations[object.AnnotationHostname]
	switch {
	case k8sGatewayAnnotated && key != object.AnnotationK8sGatewayHostname:
		// k8s_gateway reads its own annotation first.
		for _, h := range splitHostnames(svc.Annotations[object.AnnotationK8sGatewayHostname]) {
			hosts, relative, _ := cfg.Names.hostNames(h, cfg.Zones)
			if relative && len(hosts) == 0 {
				hosts = relativeNames(h, cfg.Zones)
			}
			for _, n := range hosts {
				unserved = append(unserved, UnservedName{n, ReasonK8sGatewayAnnotation})
			}
		}
	case !k8sGatewayAnnotated && !externalDNSAnnotated:
		// Neither annotation: k8s_gateway serves NAME.NAMESPACE below the zones.
		if cfg.Names.ServiceNames {
			names = append(names, relativeNames(svc.Name+"."+svc.Namespace, cfg.Zones)...)
		} else {
			for _, n := range relativeNames(svc.Name+"."+svc.Namespace, cfg.Zones) {
				unserved = append(unserved, UnservedName{n, reasonK8sGatewayServiceName})
			}
		}
	}
	if len(names) == 0 && len(bad) == 0 {
		return nil
	}
	d := lbDeclared(object.KindService, &svc.ObjectMeta)
	d.Bad = append(d.Bad, bad...)
	ready := w.Ready(svc.Namespace, svc.Name)
	d.Services = []string{svc.Namespace + "/" + svc.Name}
	for _, n := range names {
		d.Hosts = append(d.Hosts, DeclaredHost{Name: n, Ready: ready})
	}
	d.Hosts = lbSortHosts(d.Hosts)
	if len(svc.Spec.ExternalIPs) > 0 {
		// External IPs replace the load balancer's status, as external-dns
		// and k8s_gateway take them.
		for i, ip := range svc.Spec.ExternalIPs {
			a, err := netip.ParseAddr(strings.TrimSpace(ip))
			if err != nil || a.Zone() != "" {
				d.Bad = append(d.Bad, "spec.externalIPs["+strconv.Itoa(i)+"] "+strconv.Quote(ip)+": not an IP address")
				continue
			}
			d.Addrs = append(d.Addrs, a.Unmap())
		}
	} else {
		for i, lb := range svc.Status.LoadBalancer.Ingress {
			lbAddTarget(d, i, lb.IP, lb.Hostname)
		}
	}
	lbSortTargets(d)
	return d
}

// k8sGatewayServiceNames are the names k8s_gateway serves for svc in zones:
// the hosts of coredns.io/hostname, else of external-dns's annotation (each
// inside a zone as written, or below every zone when relative), else
// NAME.NAMESPACE below every zone.
func k8sGatewayServiceNames(svc *corev1.Service, zones []string) []string {
	v, ok := svc.Annotations[object.AnnotationK8sGatewayHostname]
	if !ok {
		v, ok = svc.Annotations[object.AnnotationHostname]
	}
	if !ok {
		return relativeNames(svc.Name+"."+svc.Namespace, zones)
	}
	var out []string
	for _, h := range splitHostnames(v) {
		if name, in := lbHostInZones(h, zones); in {
			out = append(out, name)
		} else if looksRelative(strings.ToLower(h)) && isK8sGatewayHost(strings.ToLower(h)) {
			out = append(out, relativeNames(h, zones)...)
		}
	}
	return out
}
