package k8scrd

import (
	"errors"
	"slices"
	"strings"

	"github.com/coredns/coredns/plugin"
	"github.com/coredns/coredns/plugin/transfer"
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
	if !s.synced {
		return nil, errNotSynced
	}
	z := s.zones[zone]
	ch := make(chan []dns.RR, 2)
	ch <- z.soa
	if serial != 0 && serial >= z.serial {
		close(ch)
		return ch, nil
	}
	go func() {
		defer close(ch)
		ch <- z.ns
		var names []string
		for _, sh := range s.shards {
			for name, n := range sh {
				if n.declared() && plugin.Zones(k.Zones).Matches(name) == zone {
					names = append(names, name)
				}
			}
		}
		sortCanonical(names)
		for _, name := range names {
			n := s.get(name)
			for _, set := range n.rrsets { // ordered by type
				if name == zone && set.rtype == dns.TypeNS {
					continue // sent above
				}
				ch <- set.rrs
			}
		}
		ch <- z.soa
	}()
	return ch, nil
}

// sortCanonical sorts names label by label from the right (RFC 4034 §6.1;
// names are lower case already), computing each name's key once.
func sortCanonical(names []string) {
	keys := make(map[string]string, len(names))
	for _, n := range names {
		labels := dns.SplitDomainName(n)
		slices.Reverse(labels)
		keys[n] = strings.Join(labels, "\x00")
	}
	slices.SortFunc(names, func(a, b string) int { return strings.Compare(keys[a], keys[b]) })
}
