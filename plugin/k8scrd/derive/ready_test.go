package derive

import (
	"testing"

	"github.com/fleetdns/fleetdns/plugin/k8scrd/object"

	discoveryv1 "k8s.io/api/discovery/v1"
)

func TestEndpointSliceReadiness(t *testing.T) {
	yes, no := lbPtr(true), lbPtr(false)
	ep := func(ready, terminating *bool) discoveryv1.Endpoint {
		return discoveryv1.Endpoint{Addresses: []string{"198.18.0.5"}, Conditions: discoveryv1.EndpointConditions{Ready: ready, Terminating: terminating}}
	}
	tests := []struct {
		name      string
		endpoints []discoveryv1.Endpoint
		want      bool
	}{
		{name: "ready", endpoints: []discoveryv1.Endpoint{ep(yes, nil)}, want: true},
		{name: "ready unset counts as ready", endpoints: []discoveryv1.Endpoint{ep(nil, nil)}, want: true},
		{name: "not ready", endpoints: []discoveryv1.Endpoint{ep(no, nil)}, want: false},
		{name: "terminating does not count although ready", endpoints: []discoveryv1.Endpoint{ep(yes, yes)}, want: false},
		{name: "terminating with ready unset does not count", endpoints: []discoveryv1.Endpoint{ep(nil, yes)}, want: false},
		{name: "terminating false is ready", endpoints: []discoveryv1.Endpoint{ep(yes, no)}, want: true},
		{name: "unready and terminating", endpoints: []discoveryv1.Endpoint{ep(no, yes)}, want: false},
		{name: "one ready among unready and terminating", endpoints: []discoveryv1.Endpoint{ep(no, nil), ep(yes, yes), ep(nil, no)}, want: true},
		{name: "no endpoints", want: false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			s := &discoveryv1.EndpointSlice{AddressType: discoveryv1.AddressTypeIPv4, Endpoints: tc.endpoints}
			if got := object.SliceReady(s); got != tc.want {
				t.Errorf("sliceReady %v, want %v", got, tc.want)
			}
		})
	}
	if object.SliceReady(nil) {
		t.Error("a missing slice is ready")
	}
}
