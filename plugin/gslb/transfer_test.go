package gslb

import (
	"errors"
	"testing"

	"github.com/coredns/coredns/plugin/transfer"
)

// TestTransferOfTheGSLBZoneRefused: gslb refuses its own zone (the transfer
// plugin then answers SERVFAIL) and leaves every other zone to k8scrd.
func TestTransferOfTheGSLBZoneRefused(t *testing.T) {
	g := New(zone)
	if ch, err := g.Transfer(zone, 0); err == nil || errors.Is(err, transfer.ErrNotAuthoritative) || ch != nil {
		t.Errorf("Transfer(%s) = %v, %v; want refused with an error of its own", zone, ch, err)
	}
	for _, other := range []string{"example.com.", "static." + zone} {
		if _, err := g.Transfer(other, 0); !errors.Is(err, transfer.ErrNotAuthoritative) {
			t.Errorf("Transfer(%s) = %v; want ErrNotAuthoritative, left to the next Transferer", other, err)
		}
	}
}
