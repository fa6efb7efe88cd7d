package localtargets

import "net/netip"

const apexSOA = "example.org. 3600 IN SOA ns1.example.org. hostmaster.example.org. 1700000000 7200 1800 86400 60"

func addrs(ss ...string) []netip.Addr {
	out := make([]netip.Addr, len(ss))
	for i, s := range ss {
		out[i] = netip.MustParseAddr(s)
	}
	return out
}
