package gslb

import (
	"errors"

	"github.com/coredns/coredns/plugin/transfer"
	"github.com/miekg/dns"
)

var errAssembled = errors.New("gslb: a GSLB zone is not transferred: its answers are assembled at query time")

// Transfer implements transfer.Transferer. A GSLB zone's answers are
// assembled at query time; a secondary would hold the static declarations,
// not the answers, so gslb refuses the zone. The transfer plugin tries gslb
// before k8scrd (directive order) and answers such an AXFR or IXFR with
// SERVFAIL. Every other zone is left to the plugins after it.
func (g *GSLB) Transfer(zone string, _ uint32) (<-chan []dns.RR, error) {
	if zone != g.zone {
		return nil, transfer.ErrNotAuthoritative
	}
	log.Warningf("Transfer of %s refused: a GSLB zone's answers are assembled at query time", zone)
	return nil, errAssembled
}
