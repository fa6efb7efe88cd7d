package gslb

import (
	"errors"
	"net/netip"

	"github.com/miekg/dns"
)

// clientSubnet returns the query's EDNS Client Subnet option (RFC 7871), or
// nil when it has none. A malformed option is an error: the caller answers
// FORMERR (RFC 7871 §7.1.1).
func clientSubnet(r *dns.Msg) (*dns.EDNS0_SUBNET, error) {
	o := r.IsEdns0()
	if o == nil {
		return nil, nil
	}
	var ecs *dns.EDNS0_SUBNET
	for _, opt := range o.Option {
		e, ok := opt.(*dns.EDNS0_SUBNET)
		if !ok {
			continue
		}
		if ecs != nil {
			return nil, errors.New("more than one ECS option")
		}
		ecs = e
	}
	if ecs == nil {
		return nil, nil
	}
	var addr netip.Addr
	var ok bool
	switch ecs.Family {
	case 0:
		// dig +subnet=0: no client information, SOURCE PREFIX-LENGTH 0.
		if ecs.SourceNetmask != 0 {
			return nil, errors.New("ECS family 0 with a prefix")
		}
		return ecs, nil
	case 1:
		addr, ok = netip.AddrFromSlice(ecs.Address.To4())
		if !ok || ecs.SourceNetmask > 32 {
			return nil, errors.New("bad ECS IPv4 address or prefix")
		}
	case 2:
		addr, ok = netip.AddrFromSlice(ecs.Address.To16())
		if !ok || ecs.SourceNetmask > 128 {
			return nil, errors.New("bad ECS IPv6 address or prefix")
		}
	default:
		return nil, errors.New("unknown ECS family")
	}
	// RFC 7871 §6: address bits beyond SOURCE PREFIX-LENGTH must be zero.
	if p := netip.PrefixFrom(addr, int(ecs.SourceNetmask)); p.Masked().Addr() != addr {
		return nil, errors.New("ECS address has bits set beyond its source prefix")
	}
	return ecs, nil
}

// ecsClient is the client geoip looks up: the subnet when the query carried
// one with a non-zero source prefix, else the source address.
func ecsClient(ecs *dns.EDNS0_SUBNET, src netip.Addr) (netip.Addr, int) {
	if ecs != nil && ecs.SourceNetmask > 0 {
		if ecs.Family == 1 {
			a, _ := netip.AddrFromSlice(ecs.Address.To4())
			return a, int(ecs.SourceNetmask)
		}
		a, _ := netip.AddrFromSlice(ecs.Address.To16())
		return a, int(ecs.SourceNetmask)
	}
	src = src.Unmap()
	return src, src.BitLen()
}

// replyOPT returns the OPT record for the reply to a query that had one:
// the ECS option echoed with family, source prefix and address, and scope
// the prefix length the answer holds for (0: the same for every client).
func replyOPT(q *dns.OPT, ecs *dns.EDNS0_SUBNET, scope int) *dns.OPT {
	o := &dns.OPT{Hdr: dns.RR_Header{Name: ".", Rrtype: dns.TypeOPT}}
	o.SetUDPSize(max(q.UDPSize(), dns.MinMsgSize))
	if q.Do() {
		o.SetDo()
	}
	if ecs != nil {
		maxBits := 32
		if ecs.Family == 2 {
			maxBits = 128
		}
		if ecs.Family == 0 || ecs.SourceNetmask == 0 {
			scope = 0 // RFC 7871 §7.2.1: no client information, scope 0
		}
		scope = min(max(scope, 0), maxBits)
		o.Option = append(o.Option, &dns.EDNS0_SUBNET{
			Code:          dns.EDNS0SUBNET,
			Family:        ecs.Family,
			SourceNetmask: ecs.SourceNetmask,
			SourceScope:   uint8(scope),
			Address:       ecs.Address,
		})
	}
	return o
}
