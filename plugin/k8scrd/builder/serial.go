package builder

import (
	"github.com/coredns/coredns/plugin"
	"github.com/fleetdns/fleetdns/plugin/k8scrd/object"
	"github.com/fleetdns/fleetdns/plugin/k8scrd/tree"
)

// observe notes a change of o (its arrival, replacement or removal) at
// version in the zones o declares names in, and o's SOA from the data.
func (b *Builder) observe(e *edit, o *object.Object, version uint64) {
	last := ""
	for name := range o.Names {
		z := plugin.Zones(b.cfg.Zones).Matches(name)
		if z == "" || z == last {
			continue
		}
		last = z
		b.versions[z] = max(b.versions[z], version)
	}
	if o.SOA == nil {
		return
	}
	z := o.SOA.Hdr.Name
	e.touched[z] = true
	b.versions[z] = max(b.versions[z], version)
	if b.objects[o.Key] == o {
		if b.dataSOA[z] == nil {
			b.dataSOA[z] = map[string]uint32{}
		}
		b.dataSOA[z][o.Key] = o.SOA.Serial
	} else {
		delete(b.dataSOA[z], o.Key)
	}
}

// serial is the SOA serial of zone z after a change (old is the zone's data
// before it, nil at start): derived from the data, so that replicas serving
// the same data publish the same serial (see README, "SOA serial").
//
//   - An SOA given in the data (directory) is the serial, as a zone file's is;
//     of several, the highest (RFC 1982).
//   - Else the highest version the zone saw: from the API, the highest
//     resourceVersion among the objects served and the deletions observed,
//     taken modulo 2^32 (an etcd revision is a uint64 that grows by one per
//     write in the cluster; RFC 1982 arithmetic holds while fewer than 2^31
//     writes separate two serials a secondary compares); from a directory, the
//     newest file time, and one more than the last serial when a change
//     falls within the same second.
//   - It never goes back (RFC 1982) in one replica.
func (b *Builder) serial(z string, old *tree.Zone) uint32 {
	if soas := b.dataSOA[z]; len(soas) > 0 {
		var s uint32
		first := true
		for _, v := range soas {
			if first || serialLess(s, v) {
				s, first = v, false
			}
		}
		return s
	}
	s := uint32(b.versions[z])
	if old == nil {
		return s
	}
	if b.cfg.FileVersions && !serialLess(old.Serial, s) {
		return old.Serial + 1
	}
	if serialLess(s, old.Serial) {
		return old.Serial
	}
	return s
}

// serialLess reports a < b in RFC 1982 serial number arithmetic.
func serialLess(a, b uint32) bool { return a != b && int32(b-a) > 0 }
