package derive

import (
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/fleetdns/fleetdns/plugin/k8scrd/object"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

func lbService(typ corev1.ServiceType, annotations map[string]string, entries ...string) *corev1.Service {
	svc := &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Namespace: "web", Name: "front", UID: "u-2", Annotations: annotations},
		Spec:       corev1.ServiceSpec{Type: typ},
	}
	for _, e := range entries {
		if ip, ok := strings.CutPrefix(e, "ip:"); ok {
			svc.Status.LoadBalancer.Ingress = append(svc.Status.LoadBalancer.Ingress, corev1.LoadBalancerIngress{IP: ip})
		} else {
			svc.Status.LoadBalancer.Ingress = append(svc.Status.LoadBalancer.Ingress, corev1.LoadBalancerIngress{Hostname: e})
		}
	}
	return svc
}

func hostnameAnnotation(list string) map[string]string {
	return map[string]string{object.AnnotationHostname: list}
}

func TestServiceDerivation(t *testing.T) {
	lb := corev1.ServiceTypeLoadBalancer
	up := []string{"web/front"}
	tests := []struct {
		name  string
		svc   *corev1.Service
		ready []string
		want  *lbView
	}{
		{
			name:  "annotation hosts, trimmed, lower-cased, empties skipped, outside the zones ignored",
			svc:   lbService(lb, hostnameAnnotation(" WWW.example.org , ,api.example.org.,www.other.net,,*.shop.test"), "ip:192.0.2.10"),
			ready: up,
			want: &lbView{
				Hosts: []string{"*.shop.test.", "api.example.org.", "www.example.org."}, Addrs: []string{"192.0.2.10"},
				Services: []string{"web/front"},
			},
		},
		{
			name:  "a host listed twice is one host",
			svc:   lbService(lb, hostnameAnnotation("www.example.org,WWW.EXAMPLE.ORG."), "ip:192.0.2.10"),
			ready: up,
			want:  &lbView{Hosts: []string{"www.example.org."}, Addrs: []string{"192.0.2.10"}, Services: []string{"web/front"}},
		},
		{
			name:  "unready when the Service has no ready endpoint",
			svc:   lbService(lb, hostnameAnnotation("www.example.org"), "ip:192.0.2.10"),
			ready: []string{"other/front", "web/back"},
			want:  &lbView{Hosts: []string{"www.example.org. unready"}, Addrs: []string{"192.0.2.10"}, Services: []string{"web/front"}},
		},
		{
			name:  "not a LoadBalancer declares nothing",
			svc:   lbService(corev1.ServiceTypeClusterIP, hostnameAnnotation("www.example.org"), "ip:192.0.2.10"),
			ready: up,
			want:  nil,
		},
		{
			name:  "NodePort declares nothing",
			svc:   lbService(corev1.ServiceTypeNodePort, hostnameAnnotation("www.example.org")),
			ready: up,
			want:  nil,
		},
		{
			name:  "without the annotation declares nothing",
			svc:   lbService(lb, map[string]string{"other.io/hostname": "www.example.org"}, "ip:192.0.2.10"),
			ready: up,
			want:  nil,
		},
		{
			name:  "no host inside the zones declares nothing",
			svc:   lbService(lb, hostnameAnnotation("www.other.net, , "), "ip:192.0.2.10"),
			ready: up,
			want:  nil,
		},
		{
			name:  "pending load balancer: hosts declared, no targets",
			svc:   lbService(lb, hostnameAnnotation("www.example.org")),
			ready: up,
			want:  &lbView{Hosts: []string{"www.example.org."}, Services: []string{"web/front"}},
		},
		{
			name:  "addresses and host names, bad address named, the others served",
			svc:   lbService(lb, hostnameAnnotation("www.example.org"), "ip:2001:db8::1", "ip:not-an-ip", "LB.Cloud.net", "ip:192.0.2.10", "ip:::ffff:192.0.2.10"),
			ready: up,
			want: &lbView{
				Hosts: []string{"www.example.org."}, Addrs: []string{"192.0.2.10", "2001:db8::1"}, Hostnames: []string{"lb.cloud.net."},
				Services: []string{"web/front"}, Bad: []string{`status.loadBalancer.ingress[1].ip "not-an-ip": not an IP address`},
			},
		},
		{
			name: "gslb annotations become properties, ttl annotation sets the ttl",
			svc: lbService(lb, map[string]string{
				object.AnnotationHostname: "www.example.org", object.AnnotationTTL: " 300 ",
				"gslb.fleetdns.io/strategy": "weighted", "gslb.fleetdns.io/weight": "eu=3,us=1",
			}, "ip:192.0.2.10"),
			ready: up,
			want: &lbView{
				Hosts: []string{"www.example.org."}, Addrs: []string{"192.0.2.10"}, Services: []string{"web/front"},
				Props: []string{"gslb/strategy=weighted", "gslb/weight=eu=3,us=1"}, TTL: "300",
			},
		},
		{
			name:  "ttl annotation out of range named, the default used",
			svc:   lbService(lb, map[string]string{object.AnnotationHostname: "www.example.org", object.AnnotationTTL: "4294967296"}, "ip:192.0.2.10"),
			ready: up,
			want: &lbView{
				Hosts: []string{"www.example.org."}, Addrs: []string{"192.0.2.10"}, Services: []string{"web/front"},
				Bad: []string{`annotation external-dns.alpha.kubernetes.io/ttl="4294967296": want seconds, 0 to 2147483647; the default TTL is used`},
			},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			w := &lbWorld{readySvcs: tc.ready}
			got := lbViewOf(deriveService(tc.svc, lbConfig(), w))
			if !lbEqualView(got, tc.want) {
				t.Errorf("got  %v\nwant %v", got, tc.want)
			}
			if got != nil && !slices.Equal(slices.Compact(slices.Sorted(slices.Values(w.asked))), got.Services) {
				t.Errorf("asked the world about %q, recorded services %q", w.asked, got.Services)
			}
		})
	}
}

func TestServiceMetadataCarried(t *testing.T) {
	created := time.Date(2026, 3, 1, 10, 0, 0, 0, time.UTC)
	changed := created.Add(time.Minute)
	svc := lbService(corev1.ServiceTypeLoadBalancer, hostnameAnnotation("www.example.org"), "ip:192.0.2.10")
	svc.CreationTimestamp = metav1.NewTime(created)
	svc.ManagedFields = []metav1.ManagedFieldsEntry{{Manager: "cloud-controller", Time: lbPtr(metav1.NewTime(changed))}}
	svc.Labels = map[string]string{"tier": "edge"}
	d := deriveService(svc, lbConfig(), &lbWorld{})
	if d == nil {
		t.Fatal("declares nothing")
	}
	if d.Kind != object.KindService || d.Namespace != "web" || d.Name != "front" || d.UID != "u-2" {
		t.Errorf("identity %s %s/%s %s, want Service web/front u-2", d.Kind, d.Namespace, d.Name, d.UID)
	}
	if !d.Created.Equal(created) || !d.Changed.Equal(changed) {
		t.Errorf("created %v changed %v, want %v and %v", d.Created, d.Changed, created, changed)
	}
	if d.labels["tier"] != "edge" || len(d.labels) != 1 {
		t.Errorf("labels %v", d.labels)
	}
}
