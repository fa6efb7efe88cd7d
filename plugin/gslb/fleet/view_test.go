package fleet

import (
	"net/netip"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/miekg/dns"
)

func TestOwnerNames(t *testing.T) {
	n := newNames("Example.org")
	long := longHost("x")
	tests := []struct {
		host, owner string
		hashed      bool
	}{
		{"www.example.org.", "www.h._fleet.example.org.", false},
		{"example.org.", "h._fleet.example.org.", false},
		{"a.b.example.org.", "a.b.h._fleet.example.org.", false},
		{long, hashLabel(long) + ".l._fleet.example.org.", true},
	}
	for _, tc := range tests {
		o, hashed := n.owner(tc.host)
		if o != tc.owner || hashed != tc.hashed {
			t.Errorf("owner(%s) = %s %v, want %s %v", tc.host, o, hashed, tc.owner, tc.hashed)
		}
		if _, ok := dns.IsDomainName(o); !ok {
			t.Errorf("owner %s is not a domain name", o)
		}
	}
}

func TestHostRecordsRoundTrip(t *testing.T) {
	n := newNames("example.org.")
	long := longHost("y")
	if _, hashed := n.owner(long); !hashed {
		t.Fatalf("%s is not hashed", long)
	}
	for _, h := range []Host{
		{Name: "www.example.org.", TTL: 30, A: []netip.Addr{netip.MustParseAddr("198.18.0.2"), netip.MustParseAddr("198.18.0.1")},
			AAAA: []netip.Addr{netip.MustParseAddr("fd00::1")}, Policy: map[string]string{"gslb/strategy": "failover", "gslb/primary": "eu"}},
		{Name: "example.org.", TTL: 5},
		{Name: long, TTL: 60, A: []netip.Addr{netip.MustParseAddr("198.18.0.3")}, Policy: map[string]string{"gslb/weight": "eu=1,us=2"}},
	} {
		norm, err := n.normalizeHost(h)
		if err != nil {
			t.Fatal(err)
		}
		rrs := n.encodeHost(nil, &norm)
		// Through the wire format and back.
		m := new(dns.Msg)
		m.Answer = rrs
		b, err := m.Pack()
		if err != nil {
			t.Fatal(err)
		}
		if err := m.Unpack(b); err != nil {
			t.Fatal(err)
		}
		got, err := n.decodeHost(m.Answer[0].Header().Name, m.Answer)
		if err != nil {
			t.Fatalf("%s: %v", h.Name, err)
		}
		if !reflect.DeepEqual(got, norm) {
			t.Errorf("round trip of %s:\n got %+v\nwant %+v", h.Name, got, norm)
		}
	}
}

func TestDecodeRefusesMalformedHosts(t *testing.T) {
	n := newNames("example.org.")
	rr := func(s string) dns.RR {
		r, err := dns.NewRR(s)
		if err != nil {
			t.Fatal(err)
		}
		return r
	}
	tests := []struct {
		name string
		rrs  []dns.RR
		want string
	}{
		{"no TXT", []dns.RR{rr("www.h._fleet.example.org. 30 A 198.18.0.1")}, "no TXT"},
		{"two TXT", []dns.RR{rr(`www.h._fleet.example.org. 30 TXT "a=1"`), rr(`www.h._fleet.example.org. 30 TXT "b=1"`)}, "more than one TXT"},
		{"policy without =", []dns.RR{rr(`www.h._fleet.example.org. 30 TXT "strategy"`)}, "malformed policy"},
		{"policy twice", []dns.RR{rr(`www.h._fleet.example.org. 30 TXT "a=1" "a=2"`)}, "twice"},
		{"PTR under h", []dns.RR{rr(`www.h._fleet.example.org. 30 TXT ""`), rr("www.h._fleet.example.org. 30 PTR www.example.org.")}, "unexpected PTR"},
		{"hash mismatch", []dns.RR{rr(`abc.l._fleet.example.org. 30 TXT ""`), rr("abc.l._fleet.example.org. 30 PTR www.example.org.")}, "does not match its hash"},
		{"PTR outside the zone", []dns.RR{rr(`` + hashLabel("www.example.com.") + `.l._fleet.example.org. 30 TXT ""`), rr(hashLabel("www.example.com.") + ".l._fleet.example.org. 30 PTR www.example.com.")}, "not in zone"},
		{"short name hashed", []dns.RR{rr(`` + hashLabel("www.example.org.") + `.l._fleet.example.org. 30 TXT ""`), rr(hashLabel("www.example.org.") + ".l._fleet.example.org. 30 PTR www.example.org.")}, "belongs at www.h._fleet.example.org."},
	}
	for _, tc := range tests {
		_, err := n.decodeHost(tc.rrs[0].Header().Name, tc.rrs)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: error %v, want %q", tc.name, err, tc.want)
		}
	}
}

func TestSerialIsTheClockAndStrictlyIncreasing(t *testing.T) {
	now := time.Unix(1_800_000_000, 500_000_000)
	clock := uint32((1_800_000_000*16 + 8) % (1 << 32))
	if s := nextSerial(0, true, clockSerial(now)); s != clock {
		t.Errorf("first serial %d, want the Unix time in sixteenths of a second mod 2^32, %d", s, clock)
	}
	if s := nextSerial(clock, false, clockSerial(now)); s != clock+1 {
		t.Errorf("second change in the same sixteenth: %d, want +1", s)
	}
	if s := nextSerial(clock-1000, false, clockSerial(now)); s != clock {
		t.Errorf("after a while: %d, want the clock", s)
	}
	// RFC 1982: past 2^32 the serial wraps and is still larger.
	if s := nextSerial(0xffffffff, false, clockSerial(time.Unix(0, 0))); s != 0 || !serialLess(0xffffffff, s) {
		t.Errorf("wrap: %d, want 0 and larger than 0xffffffff in serial arithmetic", s)
	}
	// The clock itself wraps every 2^32/16 seconds; the serial goes on.
	before := nextSerial(0, true, clockSerial(time.Unix(1<<28-1, 0)))
	if s := nextSerial(before, false, clockSerial(time.Unix(1<<28+1, 0))); !serialLess(before, s) {
		t.Errorf("clock wrap: %d after %d, want larger", s, before)
	}
	// A restart: the new first serial is above what a busy predecessor
	// published, up to 16 changes a second.
	prev, first := uint32(0), true
	start := time.Unix(1_800_000_000, 0)
	for i := range 10 * 60 * 15 { // ten minutes of 15 changes a second
		prev, first = nextSerial(prev, first, clockSerial(start.Add(time.Duration(i)*time.Second/15))), false
	}
	if s := nextSerial(0, true, clockSerial(start.Add(10*time.Minute+100*time.Millisecond))); !serialLess(prev, s) {
		t.Errorf("restart 0.1 s after ten busy minutes: %d, not above %d", s, prev)
	}
}

// longHost is a host of example.org whose name is 253 octets on the wire:
// valid, but 9 octets more do not fit.
func longHost(c string) string {
	return strings.Repeat(strings.Repeat(c, 63)+".", 3) + strings.Repeat(c, 47) + ".example.org."
}

func TestHostOctetsIsTheEncodedLength(t *testing.T) {
	n := newNames("example.org.")
	for _, h := range []Host{
		{Name: "www.example.org.", A: []netip.Addr{netip.MustParseAddr("198.18.0.1")}, AAAA: []netip.Addr{netip.MustParseAddr("fd00::1")}, Policy: map[string]string{"gslb/a": "1", "gslb/bb": ""}},
		{Name: "example.org."},
		{Name: longHost("z"), A: []netip.Addr{netip.MustParseAddr("198.18.0.1")}},
	} {
		want := 0
		for _, rr := range n.encodeHost(nil, &h) {
			want += dns.Len(rr)
		}
		if got := hostOctets(n, &h); got != want {
			t.Errorf("hostOctets(%s) = %d, want %d", h.Name, got, want)
		}
	}
}

func TestInZone(t *testing.T) {
	for _, tc := range []struct {
		name, zone string
		want       bool
	}{
		{"example.org.", "example.org.", true},
		{"www.example.org.", "example.org.", true},
		{"wwwexample.org.", "example.org.", false},
		{"org.", "example.org.", false},
		{"www.example.org.", ".", true},
		{"a\\.example.org.", "example.org.", false}, // one label "a.example"
	} {
		if got := inZone(tc.name, tc.zone); got != tc.want || got != dns.IsSubDomain(tc.zone, tc.name) {
			t.Errorf("inZone(%s, %s) = %v, want %v as dns.IsSubDomain", tc.name, tc.zone, got, tc.want)
		}
	}
}

func mustAddr(s string) netip.Addr { return netip.MustParseAddr(s) }
