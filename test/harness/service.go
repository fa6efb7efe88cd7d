package harness

import (
	"net/netip"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/client-go/util/retry"
)

// LoadBalancer creates a Service of type LoadBalancer ns/name selecting
// app=name, with the external-dns hostname annotation hosts as written
// ("" for none). Its status stays pending until LoadBalancerStatus.
func (k *Kube) LoadBalancer(t testing.TB, ns, name, hosts string) {
	t.Helper()
	svc := &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: corev1.ServiceSpec{
			Type:                          corev1.ServiceTypeLoadBalancer,
			Ports:                         []corev1.ServicePort{{Name: "http", Port: 80, TargetPort: intstr.FromInt32(8080)}},
			Selector:                      map[string]string{"app": name},
			AllocateLoadBalancerNodePorts: new(false),
		},
	}
	if hosts != "" {
		svc.Annotations = map[string]string{"external-dns.alpha.kubernetes.io/hostname": hosts}
	}
	if _, err := k.Clientset().CoreV1().Services(ns).Create(Context(t), svc, metav1.CreateOptions{}); err != nil {
		t.Fatalf("create Service %s/%s: %v", ns, name, err)
	}
}

// LoadBalancerStatus sets a LoadBalancer Service's status.loadBalancer.ingress
// through the status subresource, as a cloud controller does: each entry an
// address, or a host name when it does not parse as one.
func (k *Kube) LoadBalancerStatus(t testing.TB, ns, name string, entries ...string) {
	t.Helper()
	var ing []corev1.LoadBalancerIngress
	for _, e := range entries {
		if _, err := netip.ParseAddr(e); err == nil {
			ing = append(ing, corev1.LoadBalancerIngress{IP: e, IPMode: new(corev1.LoadBalancerIPModeVIP)})
		} else {
			ing = append(ing, corev1.LoadBalancerIngress{Hostname: e})
		}
	}
	api := k.Clientset().CoreV1().Services(ns)
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		s, err := api.Get(Context(t), name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		s.Status.LoadBalancer.Ingress = ing
		_, err = api.UpdateStatus(Context(t), s, metav1.UpdateOptions{})
		return err
	})
	if err != nil {
		t.Fatalf("status of Service %s/%s: %v", ns, name, err)
	}
}
