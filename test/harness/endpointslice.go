package harness

import (
	"testing"

	discoveryv1 "k8s.io/api/discovery/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/util/retry"
)

// PutEndpointSlice creates es in namespace ns, or replaces the stored one of
// its name, retrying on conflicts: what the EndpointSlice controller does
// when a Service's endpoints change (no controller runs in the tests).
func (k *Kube) PutEndpointSlice(t testing.TB, ns string, es *discoveryv1.EndpointSlice) {
	t.Helper()
	api := k.Clientset().DiscoveryV1().EndpointSlices(ns)
	ctx := Context(t)
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		cur, err := api.Get(ctx, es.Name, metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			_, err = api.Create(ctx, es, metav1.CreateOptions{})
			return err
		}
		if err != nil {
			return err
		}
		es.ResourceVersion = cur.ResourceVersion
		_, err = api.Update(ctx, es, metav1.UpdateOptions{})
		return err
	})
	if err != nil {
		t.Fatalf("EndpointSlice %s/%s: %v", ns, es.Name, err)
	}
}
