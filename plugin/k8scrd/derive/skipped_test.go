package derive

import (
	"slices"
	"testing"

	"github.com/fleetdns/fleetdns/plugin/k8scrd/object"

	"github.com/prometheus/client_golang/prometheus/testutil"
	corev1 "k8s.io/api/core/v1"
)

// TestDeriveReportedSaysAndStillCounts: the API feed's derivation hands the
// names k8s_gateway would serve to the report (each with its reason and
// advice; a LoadBalancer Service's NAME.NAMESPACE names are the lint's
// alone, no Event, as most such Services are not meant for DNS) and still
// logs and counts them once, as without the report.
func TestDeriveReportedSaysAndStillCounts(t *testing.T) {
	cfg := lbConfig()
	before := testutil.ToFloat64(unservedNames.WithLabelValues(reasonK8sGatewayServiceName))
	svc := lbService(corev1.ServiceTypeLoadBalancer, nil, "ip:192.0.2.1")
	svc.Name = "reported"
	d, _, unserved := DeriveReported(object.KindService, svc, cfg, &lbWorld{})
	if d != nil {
		t.Errorf("declared %+v without service_names", d)
	}
	if n := testutil.ToFloat64(unservedNames.WithLabelValues(reasonK8sGatewayServiceName)) - before; n != 2 {
		t.Errorf("counted %v, want 2 (one name per zone)", n)
	}
	if cfg.Names.Unserved != nil {
		t.Error("the block's config was given a collector")
	}
	notes := SkippedNames(object.KindService, svc, d, unserved, cfg, &lbWorld{})
	var got []string
	for _, n := range notes {
		if !n.LintOnly || n.K8sGateway != reasonK8sGatewayServiceName {
			t.Errorf("note %+v: want a lint-only note with reason %s", n, reasonK8sGatewayServiceName)
		}
		got = append(got, n.Msg)
	}
	want := []string{
		"reported.web.example.org. (k8s_gateway_service_name): " + UnservedHelp[reasonK8sGatewayServiceName],
		"reported.web.shop.test. (k8s_gateway_service_name): " + UnservedHelp[reasonK8sGatewayServiceName],
	}
	if !slices.Equal(got, want) {
		t.Errorf("notes %q, want %q", got, want)
	}
}
