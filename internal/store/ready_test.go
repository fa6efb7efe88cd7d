package store_test

import (
	"net/netip"
	"slices"
	"testing"
	"unsafe"

	"github.com/fleetdns/fleetdns/internal/store/storetest"
)

func TestReadyIsTheTargetsWhenNothingIsWithdrawn(t *testing.T) {
	h := storetest.Host("app.example.org.", "192.0.2.1", "2001:db8::1")
	a, aaaa := h.Ready()
	if unsafe.SliceData(a) != unsafe.SliceData(h.A) || len(a) != 1 || unsafe.SliceData(aaaa) != unsafe.SliceData(h.AAAA) || len(aaaa) != 1 {
		t.Errorf("Ready() = %v %v, want the host's own slices %v %v", a, aaaa, h.A, h.AAAA)
	}
}

func TestReadyLeavesWithdrawnTargetsOut(t *testing.T) {
	h := storetest.Host("app.example.org.", "192.0.2.1", "192.0.2.2", "2001:db8::1")
	w := storetest.Withdraw(h, "192.0.2.1")
	if w.Withdrawn == nil || h.Withdrawn != nil {
		t.Fatal("Withdraw changed the original or withdrew nothing")
	}
	a, aaaa := w.Ready()
	if !slices.Equal(a, addrs("192.0.2.2")) || !slices.Equal(aaaa, addrs("2001:db8::1")) {
		t.Errorf("Ready() = %v %v", a, aaaa)
	}
	if !slices.Equal(w.A, h.A) || !slices.Equal(w.AAAA, h.AAAA) {
		t.Errorf("A and AAAA changed: %v %v", w.A, w.AAAA)
	}
	// Withdrawing more keeps what was withdrawn; everything withdrawn leaves none.
	all := storetest.Withdraw(w, "192.0.2.2", "2001:db8::1")
	if a, aaaa := all.Ready(); len(a)+len(aaaa) != 0 || !all.AddressDeclared {
		t.Errorf("all withdrawn: Ready() = %v %v, declared %v", a, aaaa, all.AddressDeclared)
	}
	if none := storetest.Withdraw(h); none.Withdrawn != nil {
		t.Errorf("withdrawing nothing: %+v", none.Withdrawn)
	}
}

func addrs(ss ...string) []netip.Addr {
	var out []netip.Addr
	for _, s := range ss {
		out = append(out, netip.MustParseAddr(s))
	}
	return out
}
