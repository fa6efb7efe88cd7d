package k8scrd

import (
	"strings"

	corev1 "k8s.io/api/core/v1"
)

// deriveService derives what a Service of type LoadBalancer declares: the
// hosts of its external-dns hostname annotation that lie inside the zones,
// the addresses and host names of its load balancer's status, healthy while
// the Service itself has a ready endpoint. nil: the Service declares
// nothing (another type, or no host inside the zones).
func deriveService(svc *corev1.Service, cfg *config, w world) *declared {
	if svc == nil || svc.Spec.Type != corev1.ServiceTypeLoadBalancer {
		return nil
	}
	var names []string
	for h := range strings.SplitSeq(svc.Annotations[annotationHostname], ",") {
		if name, ok := lbHostInZones(h, cfg.zones); ok {
			names = append(names, name)
		}
	}
	if len(names) == 0 {
		return nil
	}
	d := lbDeclared(kindService, &svc.ObjectMeta)
	ready := w.ready(svc.Namespace, svc.Name)
	d.services = []string{svc.Namespace + "/" + svc.Name}
	for _, n := range names {
		d.hosts = append(d.hosts, declaredHost{name: n, ready: ready})
	}
	d.hosts = lbSortHosts(d.hosts)
	for i, lb := range svc.Status.LoadBalancer.Ingress {
		lbAddTarget(d, i, lb.IP, lb.Hostname)
	}
	lbSortTargets(d)
	return d
}
