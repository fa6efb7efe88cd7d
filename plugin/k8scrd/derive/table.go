package derive

import (
	"github.com/fleetdns/fleetdns/plugin/k8scrd/object"
	gatewayv1 "sigs.k8s.io/gateway-api/apis/v1"
)

// deriver is how objects of one of the cluster's kinds are derived: derive
// says what an object declares (nil: nothing); parents, for a route, names
// the Gateways it is attached to, read even when they do not accept it.
type deriver struct {
	derive  func(obj any, cfg *Options, w World) *Declared
	parents func(obj any) []gatewayv1.ParentReference
}

// derivers is the one table of the derived kinds, one file each
// (ingress.go, service.go, route.go, gslb.go): the API feed,
// the directory feed and the Gslb source derive every object through it.
var derivers = map[string]deriver{
	object.KindIngress: {derive: derives(deriveIngress)},
	object.KindService: {derive: derives(deriveService)},
	object.KindHTTPRoute: {derive: derives(deriveHTTPRoute), parents: parentRefs(func(r *gatewayv1.HTTPRoute) []gatewayv1.ParentReference {
		return r.Spec.ParentRefs
	})},
	object.KindGRPCRoute: {derive: derives(deriveGRPCRoute), parents: parentRefs(func(r *gatewayv1.GRPCRoute) []gatewayv1.ParentReference {
		return r.Spec.ParentRefs
	})},
	object.KindTLSRoute: {derive: derives(deriveTLSRoute), parents: parentRefs(func(r *gatewayv1.TLSRoute) []gatewayv1.ParentReference {
		return r.Spec.ParentRefs
	})},
}

// Derive derives obj of kind through the table; nil when the kind is not
// in it or obj is not of the kind's type.
func Derive(kind string, obj any, cfg *Options, w World) (d *Declared, parents []gatewayv1.ParentReference) {
	k, ok := derivers[kind]
	if !ok {
		return nil, nil
	}
	if k.parents != nil {
		parents = k.parents(obj)
	}
	return k.derive(obj, cfg, w), parents
}

// derives adapts a kind's typed derivation to the table's signature.
func derives[T any](f func(T, *Options, World) *Declared) func(any, *Options, World) *Declared {
	return func(obj any, cfg *Options, w World) *Declared {
		o, ok := obj.(T)
		if !ok {
			return nil
		}
		return f(o, cfg, w)
	}
}

// parentRefs adapts a route kind's parentRefs to the table's signature.
func parentRefs[T any](f func(T) []gatewayv1.ParentReference) func(any) []gatewayv1.ParentReference {
	return func(obj any) []gatewayv1.ParentReference {
		o, ok := obj.(T)
		if !ok {
			return nil
		}
		return f(o)
	}
}
