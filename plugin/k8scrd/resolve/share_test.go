package resolve

import (
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/fleetdns/fleetdns/internal/testkit"
	"github.com/miekg/dns"
	"github.com/prometheus/client_golang/prometheus/testutil"
)

// Issue 24, finding 1: a name answered with thousands of addresses keeps
// resolverMaxAddrs of each family, the lowest, and says so.
func TestResolverCapsAddressesPerNameAndFamily(t *testing.T) {
	f := startFakeDNS(t)
	var rrs []string
	for i := range 300 {
		rrs = append(rrs, fmt.Sprintf("lb.example.com. 30 IN A 198.18.%d.%d", i/256, i%256))
		rrs = append(rrs, fmt.Sprintf("lb.example.com. 30 IN AAAA 2001:db8::%x", i))
	}
	f.set(t, "lb.example.com.", dns.RcodeSuccess, rrs...)
	truncated := func(typ string) float64 { return testutil.ToFloat64(resolverTruncatedNames.WithLabelValues(typ)) }
	baseA, base6 := truncated("A"), truncated("AAAA")
	r, _ := startResolver(t, []string{f.addr}, 100*time.Millisecond, 5*time.Second, 10)
	r.track("Ingress:ns/a", []string{"lb.example.com."}, false)
	testkit.Eventually(t, 2*time.Second, "resolved", func() (bool, string) {
		n := len(r.addrs("lb.example.com."))
		return n > 0, fmt.Sprintf("%d addresses", n)
	})
	got := r.addrs("lb.example.com.")
	var v4, v6 int
	for _, a := range got {
		if a.Is4() {
			v4++
		} else {
			v6++
		}
	}
	if v4 != resolverMaxAddrs || v6 != resolverMaxAddrs {
		t.Errorf("kept %d A and %d AAAA addresses, want %d of each", v4, v6, resolverMaxAddrs)
	}
	if got[0].String() != "198.18.0.0" || got[v4-1].String() != "198.18.0.63" {
		t.Errorf("kept A %v..%v, want the lowest 198.18.0.0..198.18.0.63", got[0], got[v4-1])
	}
	if a, b := truncated("A")-baseA, truncated("AAAA")-base6; a != 1 || b != 1 {
		t.Errorf("truncated names A %v, AAAA %v; want 1, 1", a, b)
	}
	r.track("Ingress:ns/a", nil, false)
	if a := truncated("A") - baseA; a != 0 {
		t.Errorf("truncated names after the name left: %v, want 0", a)
	}
}

// Issue 24, finding 1: one object's names beyond resolverMaxPerObject are
// not resolved, and counted.
func TestResolverCapsNamesPerObject(t *testing.T) {
	f := startFakeDNS(t)
	var names []string
	for i := range 40 {
		n := fmt.Sprintf("lb%02d.example.com.", i)
		f.set(t, n, dns.RcodeSuccess, n+" 30 IN A 198.18.0.1")
		names = append(names, n)
	}
	object := func() float64 { return testutil.ToFloat64(resolverSkippedNames.WithLabelValues("object")) }
	base := object()
	r, _ := startResolver(t, []string{f.addr}, 100*time.Millisecond, 5*time.Second, 1000)
	r.track("Gslb:ns/big", names, true)
	testkit.Eventually(t, 2*time.Second, "the first names resolved", addrsAre(r, names[resolverMaxPerObject-1], "198.18.0.1"))
	time.Sleep(200 * time.Millisecond)
	if got := r.addrs(names[resolverMaxPerObject]); got != nil {
		t.Errorf("name %d of one object resolved: %v", resolverMaxPerObject+1, got)
	}
	if n := len(f.asks(names[len(names)-1], dns.TypeA)); n != 0 {
		t.Errorf("a name beyond the object's cap was asked %d times", n)
	}
	if got := object() - base; got != float64(len(names)-resolverMaxPerObject) {
		t.Errorf("skipped names (object): %v, want %d", got, len(names)-resolverMaxPerObject)
	}
	r.track("Gslb:ns/big", nil, true)
	if got := object() - base; got != 0 {
		t.Errorf("skipped names (object) once untracked: %v, want 0", got)
	}
}

// Issue 24, finding 2: status host names are resolved before annotated
// ones, and namespaces share the cap in turns.
func TestResolverSharesTheCap(t *testing.T) {
	r := newResolver([]string{"127.0.0.1:1"}, time.Second, time.Minute, 10, nil)
	var attacker []string
	for i := range 16 {
		attacker = append(attacker, fmt.Sprintf("a%02d.evil.example.", i))
	}
	// A tenant's annotation fills the cap first...
	r.track("Gslb:evil/g1", attacker, true)
	r.track("Gslb:evil/g2", attacker[8:], true)
	// ... then a controller writes another team's status, and a third
	// namespace has many status names of its own.
	r.track("Ingress:team/web", []string{"elb-1.amazonaws.example."}, false)
	var many []string
	for i := range 12 {
		many = append(many, fmt.Sprintf("m%02d.big.example.", i))
	}
	r.track("Service:big/lb", many, false)
	r.share()

	resolved := func() []string {
		r.mu.Lock()
		defer r.mu.Unlock()
		var out []string
		for n := range r.names {
			out = append(out, n)
		}
		slices.Sort(out)
		return out
	}
	got := resolved()
	if len(got) != 10 {
		t.Fatalf("%d names resolved, want the cap of 10: %v", len(got), got)
	}
	if !slices.Contains(got, "elb-1.amazonaws.example.") {
		t.Errorf("another team's status host name is not resolved: %v", got)
	}
	for _, n := range got {
		if n[0] == 'a' {
			t.Errorf("an annotated name %s took a place while status names wait: %v", n, got)
		}
	}

	// Status names within the cap: the annotated ones share the rest.
	r.track("Service:big/lb", many[:3], false)
	r.share()
	got = resolved()
	if len(got) != 10 || !slices.Contains(got, "elb-1.amazonaws.example.") || !slices.Contains(got, "m02.big.example.") {
		t.Errorf("resolved %v, want the 4 status names and 6 annotated", got)
	}
}

// Issue 24, finding 2: within one tier, a namespace that needs few names
// gets all of them; the others share the rest in turns.
func TestResolverChoiceIsFairBetweenNamespaces(t *testing.T) {
	r := newResolver([]string{"127.0.0.1:1"}, time.Second, time.Minute, 9, nil)
	names := func(prefix string, n int) []string {
		var out []string
		for i := range n {
			out = append(out, fmt.Sprintf("%s%02d.example.", prefix, i))
		}
		return out
	}
	r.track("Ingress:a/x", names("a", 16), false)
	r.track("Ingress:b/x", names("b", 16), false)
	r.track("Ingress:c/x", names("c", 1), false)
	r.track("Ingress:c/y", names("cy", 1), false)
	r.mu.Lock()
	chosen := r.choose()
	r.mu.Unlock()
	count := map[byte]int{}
	for n := range chosen {
		count[n[0]]++
	}
	// Rounds: a b c(x), a b c(y), a b, a: c's two names, the rest in turns.
	if count['a'] != 4 || count['b'] != 3 || count['c'] != 2 {
		t.Errorf("places by namespace %v, want a 4, b 3, c 2", count)
	}
}
