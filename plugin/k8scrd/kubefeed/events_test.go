package kubefeed

import (
	"testing"

	"github.com/fleetdns/fleetdns/plugin/k8scrd/object"
)

// A Gslb's Events go to the Gslb of its own group: k8gb.io, or the legacy
// k8gb.absa.oss.
func TestObjectRefOfGslbs(t *testing.T) {
	o := &object.Object{Kind: object.KindGslb, Namespace: "web", Name: "shop"}
	if ref := objectRef(o); ref.APIVersion != "k8gb.io/v1beta1" || ref.Kind != "Gslb" {
		t.Errorf("Events go to %s %s, want k8gb.io/v1beta1 Gslb", ref.APIVersion, ref.Kind)
	}
	o.Kind = object.KindGslbLegacy
	if ref := objectRef(o); ref.APIVersion != "k8gb.absa.oss/v1beta1" || ref.Kind != "Gslb" {
		t.Errorf("Events go to %s %s, want k8gb.absa.oss/v1beta1 Gslb", ref.APIVersion, ref.Kind)
	}
}
