package kubefeed

import (
	"testing"

	"github.com/fleetdns/fleetdns/plugin/k8scrd/object"

	"github.com/fleetdns/fleetdns/plugin/k8scrd/object/objecttest"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/external-dns/endpoint"
)

func TestK8gbController(t *testing.T) {
	yes := true
	no := false
	owner := func(api, kind string, ctl *bool) []metav1.OwnerReference {
		return []metav1.OwnerReference{{APIVersion: api, Kind: kind, Name: "shop", UID: types.UID("g-1"), Controller: ctl}}
	}
	tests := []struct {
		name string
		m    metav1.ObjectMeta
		want string
	}{
		{"k8gb.io", metav1.ObjectMeta{Labels: map[string]string{object.LabelDNSType: "local"}, OwnerReferences: owner("k8gb.io/v1beta1", "Gslb", &yes)}, "g-1"},
		{"legacy label and group", metav1.ObjectMeta{Labels: map[string]string{object.LabelLegacyDNSType: "local"}, OwnerReferences: owner("k8gb.absa.oss/v1beta1", "Gslb", &yes)}, "g-1"},
		{"no k8gb label", metav1.ObjectMeta{OwnerReferences: owner("k8gb.io/v1beta1", "Gslb", &yes)}, ""},
		{"not the controller", metav1.ObjectMeta{Labels: map[string]string{object.LabelDNSType: "local"}, OwnerReferences: owner("k8gb.io/v1beta1", "Gslb", &no)}, ""},
		{"another kind", metav1.ObjectMeta{Labels: map[string]string{object.LabelDNSType: "local"}, OwnerReferences: owner("k8gb.io/v1beta1", "ZoneDelegation", &yes)}, ""},
		{"another group", metav1.ObjectMeta{Labels: map[string]string{object.LabelDNSType: "local"}, OwnerReferences: owner("example.com/v1", "Gslb", &yes)}, ""},
	}
	for _, tc := range tests {
		if got := k8gbController(&tc.m); got != tc.want {
			t.Errorf("%s: %q, want %q", tc.name, got, tc.want)
		}
	}
}

// A DNSEndpoint that k8gb's operator wrote leaves the store while its Gslb
// is served and returns when the Gslb is gone; others pass untouched.
func TestGslbOwnersHoldBackOperatorRecords(t *testing.T) {
	zones := []string{"example.org."}
	b := &objecttest.Sink{}
	g := newGslbOwners(b)
	mk := func(name string) *object.Object {
		o, _ := object.New(object.Meta{Key: "web/" + name, Namespace: "web", Name: name},
			[]*endpoint.Endpoint{{DNSName: name + ".example.org", RecordType: "A", Targets: endpoint.Targets{"198.51.100.1"}}}, zones, 30)
		return o
	}
	has := b.Holds
	g.upsert(mk("shop"), "g-1")
	g.upsert(mk("mine"), "")
	if !has("web/shop") || !has("web/mine") {
		t.Fatal("DNSEndpoints not served before any Gslb is")
	}
	g.serve("Gslb:web/shop", "g-1")
	if has("web/shop") {
		t.Error("k8gb's DNSEndpoint still served once its Gslb is")
	}
	if !has("web/mine") {
		t.Error("an unrelated DNSEndpoint left the store")
	}
	g.upsert(mk("shop"), "g-1") // the operator's object updated while its Gslb is served
	if has("web/shop") {
		t.Error("an update let k8gb's DNSEndpoint back")
	}
	g.serve("Gslb:web/shop", "g-1") // derived again
	g.unserve("Gslb:web/shop")
	if !has("web/shop") {
		t.Error("k8gb's DNSEndpoint not served again after its Gslb is gone")
	}
	g.serve("Gslb:web/shop", "g-1")
	g.remove("web/shop", 0)
	g.unserve("Gslb:web/shop")
	if has("web/shop") {
		t.Error("a deleted DNSEndpoint came back")
	}
}
