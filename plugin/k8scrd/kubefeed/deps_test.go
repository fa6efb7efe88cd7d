package kubefeed

import (
	"slices"
	"testing"
)

// The dependency index answers who read what as objects are derived again,
// read something else, or go, whether one object or several read a thing.
func TestDependentsFollowTheLastDerivation(t *testing.T) {
	d := newDependents()
	readers := func(dep string) []string { r := d.readers(dep); slices.Sort(r); return r }
	d.use("Ingress:web/a", []string{"svc:web/a", "gw:web/gw"})
	d.use("Ingress:web/b", []string{"svc:web/b", "gw:web/gw"})
	d.use("Ingress:web/c", []string{"gw:web/gw"})
	if got := readers("gw:web/gw"); !slices.Equal(got, []string{"Ingress:web/a", "Ingress:web/b", "Ingress:web/c"}) {
		t.Errorf("gw readers %v", got)
	}
	if got := readers("svc:web/a"); !slices.Equal(got, []string{"Ingress:web/a"}) {
		t.Errorf("svc:web/a readers %v", got)
	}
	// a reads another Service now, and no longer the Gateway.
	d.use("Ingress:web/a", []string{"svc:web/other"})
	if got := readers("svc:web/a"); len(got) != 0 {
		t.Errorf("svc:web/a still read by %v", got)
	}
	if got := readers("gw:web/gw"); !slices.Equal(got, []string{"Ingress:web/b", "Ingress:web/c"}) {
		t.Errorf("gw readers after a moved %v", got)
	}
	// The first reader goes: another one takes its place.
	d.use("Ingress:web/b", nil)
	d.use("Ingress:web/a", nil)
	if got := readers("gw:web/gw"); !slices.Equal(got, []string{"Ingress:web/c"}) {
		t.Errorf("gw readers after b went %v", got)
	}
	d.use("Ingress:web/c", nil)
	if len(d.by) != 0 || len(d.uses) != 0 {
		t.Errorf("index not empty after every object went: %v %v", d.by, d.uses)
	}
}
