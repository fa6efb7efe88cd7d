package hostile_test

import (
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/fleetdns/fleetdns/internal/testkit"
	"github.com/fleetdns/fleetdns/test/harness"
	"github.com/miekg/dns"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
)

// TestHostileLargeObjectsCostLittle is issue 24's finding 12: a tenant
// creates 150 Services and 150 Ingresses that declare nothing, each with a
// 200 KiB annotation no derivation reads (60 MiB of annotations). The
// informer caches keep only what the derivations read, so the heap
// (go_memstats_heap_inuse_bytes, from the process's /metrics) grows by less
// than 24 MiB once a Service and an Ingress created after them are served;
// caches that keep the whole objects grow by more than the 60 MiB.
func TestHostileLargeObjectsCostLittle(t *testing.T) {
	const (
		each  = 150
		blob  = 200 << 10
		bound = 24 * mib
	)
	k := harness.SharedKube(t)
	ns := k.NewNamespace(t, "bulky")
	cs := k.Clientset()

	ip := harness.NewIP(t)
	metrics := harness.HostPort(t, ip)
	ready := harness.HostPort(t, ip)
	cd := harness.StartCoreDNS(t, fmt.Sprintf(`example.org {
    bind %s
    prometheus %s
    ready %s
    k8scrd {
        kubeconfig %s
        resources Service Ingress
        namespaces %s
    }
}
`, ip, metrics, ready, k.Kubeconfig, ns), harness.WithReadyURL("http://"+ready+"/ready"), harness.WithStartTimeout(time.Minute))
	baseHeap := heapInuse(t, metrics)

	big := map[string]string{"tools.example.com/blob": strings.Repeat("x", blob)}
	ctx := harness.Context(t)
	var wg sync.WaitGroup
	errs := make(chan error, 2*each)
	sem := make(chan struct{}, 8)
	for i := range each {
		wg.Add(2)
		go func() {
			defer wg.Done()
			sem <- struct{}{}
			defer func() { <-sem }()
			svc := &corev1.Service{
				ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("svc-%03d", i), Annotations: big},
				Spec:       corev1.ServiceSpec{Ports: []corev1.ServicePort{{Port: 80, TargetPort: intstr.FromInt32(8080)}}},
			}
			if _, err := cs.CoreV1().Services(ns).Create(ctx, svc, metav1.CreateOptions{}); err != nil {
				errs <- err
			}
		}()
		go func() {
			defer wg.Done()
			sem <- struct{}{}
			defer func() { <-sem }()
			ing := &networkingv1.Ingress{
				ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("ing-%03d", i), Annotations: big},
				Spec:       networkingv1.IngressSpec{Rules: []networkingv1.IngressRule{{Host: fmt.Sprintf("h%03d.other.test", i)}}},
			}
			if _, err := cs.NetworkingV1().Ingresses(ns).Create(ctx, ing, metav1.CreateOptions{}); err != nil {
				errs <- err
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatalf("create: %v", err)
	}

	// Created after the bulky ones: once both are served, every bulky
	// object has been through the caches.
	k.LoadBalancer(t, ns, "last", "last-svc.example.org")
	svc, err := cs.CoreV1().Services(ns).Get(ctx, "last", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	svc.Status.LoadBalancer.Ingress = []corev1.LoadBalancerIngress{{IP: "198.18.0.21"}}
	if _, err := cs.CoreV1().Services(ns).UpdateStatus(ctx, svc, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	ing, err := cs.NetworkingV1().Ingresses(ns).Create(ctx, &networkingv1.Ingress{
		ObjectMeta: metav1.ObjectMeta{Name: "last"},
		Spec:       networkingv1.IngressSpec{Rules: []networkingv1.IngressRule{{Host: "last-ing.example.org"}}},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	ing.Status.LoadBalancer.Ingress = []networkingv1.IngressLoadBalancerIngress{{IP: "198.18.0.22"}}
	if _, err := cs.NetworkingV1().Ingresses(ns).UpdateStatus(ctx, ing, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	for name, want := range map[string]string{"last-svc.example.org.": "198.18.0.21", "last-ing.example.org.": "198.18.0.22"} {
		if note, ok := testkit.Within(60*time.Second, func() (bool, string) {
			r, err := harness.Ask(cd.Addr, name, dns.TypeA, harness.NoRD, harness.Timeout(2*time.Second))
			if err != nil {
				return false, err.Error()
			}
			got := harness.Targets(r, dns.TypeA)
			return strings.Join(got, ",") == want, fmt.Sprintf("%s A = %v, want %s", name, got, want)
		}); !ok {
			t.Fatalf("finding 12: the objects created after the bulky ones are not served: %s", note)
		}
	}

	heap, rss := memory(t, metrics, cd)
	t.Logf("heap in use %s at start, %s after %d Services and %d Ingresses with %d KiB annotations; VmRSS %s",
		fmtMiB(baseHeap), fmtMiB(heap), each, each, blob>>10, fmtMiB(rss))
	if grew := heap - baseHeap; grew > bound {
		t.Errorf("finding 12: the heap grew by %s with objects that declare nothing, want under %s (the caches keep what the derivations read)", fmtMiB(grew), fmtMiB(bound))
	}
}
