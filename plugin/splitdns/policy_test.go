package splitdns

import (
	"slices"
	"testing"
)

func TestPolicies(t *testing.T) {
	us := []*upstream{{addr: "a"}, {addr: "b"}, {addr: "c"}}
	addrs := func(l []*upstream) []string {
		s := make([]string, len(l))
		for i, u := range l {
			s[i] = u.addr
		}
		return s
	}

	if got := addrs(newPolicy("sequential").List(us)); !slices.Equal(got, []string{"a", "b", "c"}) {
		t.Errorf("sequential: %v", got)
	}

	rr := newPolicy("round_robin")
	firsts := map[string]int{}
	for range 30 {
		l := addrs(rr.List(us))
		firsts[l[0]]++
		sorted := slices.Clone(l)
		slices.Sort(sorted)
		if !slices.Equal(sorted, []string{"a", "b", "c"}) {
			t.Fatalf("round_robin lost an upstream: %v", l)
		}
	}
	if firsts["a"] != 10 || firsts["b"] != 10 || firsts["c"] != 10 {
		t.Errorf("round_robin should start at each upstream in turn: %v", firsts)
	}

	r := newPolicy("random")
	firsts = map[string]int{}
	for range 300 {
		l := addrs(r.List(us))
		firsts[l[0]]++
		if len(l) != 3 {
			t.Fatalf("random lost an upstream: %v", l)
		}
	}
	for _, a := range []string{"a", "b", "c"} {
		if firsts[a] < 50 {
			t.Errorf("random: %s first only %d times of 300", a, firsts[a])
		}
	}
	if newPolicy("fastest") != nil {
		t.Errorf("unknown policy accepted")
	}
}
