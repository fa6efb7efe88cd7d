package k8scrd

import (
	"errors"

	"github.com/coredns/coredns/plugin"
	"github.com/coredns/coredns/plugin/transfer"
	"github.com/fleetdns/fleetdns/plugin/k8scrd/tree"
	"github.com/miekg/dns"
)

var errNotSynced = errors.New("k8scrd: no first sync yet, nothing to transfer")

// Transfer implements transfer.Transferer: an AXFR of the zone as the store
// holds it now (one snapshot, so the transfer is consistent). An IXFR whose
// serial is current gets the SOA alone; any other IXFR falls back to AXFR.
func (k *K8sCRD) Transfer(zone string, serial uint32) (<-chan []dns.RR, error) {
	if plugin.Zones(k.Zones).Matches(zone) != zone {
		return nil, transfer.ErrNotAuthoritative
	}
	s := k.snap.Load()
	if !s.Synced {
		return nil, errNotSynced
	}
	z := s.Zones[zone]
	ch := make(chan []dns.RR, 2)
	ch <- z.SOA
	if serial != 0 && serial >= z.Serial {
		close(ch)
		return ch, nil
	}
	go func() {
		defer close(ch)
		ch <- z.NS
		var names []string
		for _, sh := range s.Shards {
			for name, n := range sh {
				if n.Declared() && plugin.Zones(k.Zones).Matches(name) == zone {
					names = append(names, name)
				}
			}
		}
		tree.SortCanonical(names)
		for _, name := range names {
			n := s.Get(name)
			for _, set := range n.RRsets { // ordered by type
				if name == zone && set.Type == dns.TypeNS {
					continue // sent above
				}
				ch <- set.RRs
			}
		}
		ch <- z.SOA
	}()
	return ch, nil
}
