package main

import (
	"fmt"
	"math"
	"os"
	"reflect"
	"runtime"
	"strings"
	"testing"
)

// testdata/callgrind.out is a real dump made by `callgrind_control -d`
// (valgrind 3.19.0): the one-second idle window of the forward-1-zone
// server in a `-quick -only splitdns` run (paths shortened).
func TestParseDump(t *testing.T) {
	f, err := os.Open("testdata/callgrind.out")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	got, err := parseDump(f)
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 1 || got["Ir"] != 9870 {
		t.Errorf("got %v, want map[Ir:9870]", got)
	}
}

func TestParseDumpForms(t *testing.T) {
	for _, tc := range []struct {
		name, dump string
		want       map[string]int64 // nil: an error
	}{
		{"totals win over summary", "events: Ir\nsummary: 5\nfn=(1) x\n0 7\ntotals: 7\n", map[string]int64{"Ir": 7}},
		{"summary alone", "events: Ir\nsummary: 42\n", map[string]int64{"Ir": 42}},
		{"several events, trailing zero left out", "events: Ir Dr Dw\ntotals: 100 30\n", map[string]int64{"Ir": 100, "Dr": 30, "Dw": 0}},
		{"dump still being written", "# callgrind format\nversion: 1\nevents: Ir\n", nil},
		{"empty", "", nil},
		{"no Ir", "events: Dr\ntotals: 3\n", nil},
		{"more totals than events", "events: Ir\ntotals: 1 2\n", nil},
		{"not a number", "events: Ir\ntotals: x\n", nil},
	} {
		got, err := parseDump(strings.NewReader(tc.dump))
		if tc.want == nil {
			if err == nil {
				t.Errorf("%s: got %v, want an error", tc.name, got)
			}
			continue
		}
		if err != nil {
			t.Errorf("%s: %v", tc.name, err)
			continue
		}
		if len(got) != len(tc.want) {
			t.Errorf("%s: got %v, want %v", tc.name, got, tc.want)
		}
		for k, v := range tc.want {
			if got[k] != v {
				t.Errorf("%s: %s = %d, want %d", tc.name, k, got[k], v)
			}
		}
	}
}

// The end of a heap profile with debug=1 (runtime/pprof writes MemStats).
func TestParseMemStats(t *testing.T) {
	prof := "heap profile: 1: 2 [3: 4] @ heap/1048576\n\n# runtime.MemStats\n# Alloc = 123\n# TotalAlloc = 4567\n# Mallocs = 89\n# PauseNs = [1 2 3]\n# NumGC = 17\n# NextGC = 18446744073709551615\n# NumForcedGC = 3\n# DebugGC = false\n"
	got, err := parseMemStats([]byte(prof))
	if err != nil {
		t.Fatal(err)
	}
	for k, v := range map[string]int64{"NumGC": 17, "NumForcedGC": 3, "TotalAlloc": 4567, "Mallocs": 89, "Alloc": 123, "NextGC": math.MaxInt64} {
		if got[k] != v {
			t.Errorf("%s = %d, want %d", k, got[k], v)
		}
	}
	if _, err := parseMemStats([]byte("# NumForcedGC = 3\n")); err == nil {
		t.Error("a profile without NumGC accepted")
	}
}

func TestParseCalls(t *testing.T) {
	isCopy := func(s string) bool { return s == "runtime.copystack" || s == "0x0000000000470ae0" }
	for _, tc := range []struct {
		name, dump string
		want       calls
	}{
		{"names compressed, defined by fn=", "positions: line\nevents: Ir\nfn=(5) runtime.copystack\n0 10\nfn=(6) runtime.newstack\n0 3\ncfn=(5)\ncalls=716 0 \n0 22191435\ncfn=(7) runtime.stackalloc\ncalls=1 0\n0 99\n",
			calls{716, 22191435}},
		{"a stripped binary's address, two call sites, recursion suffix", "events: Ir\nfn=(1) 0x0000000000470ae0\n0 1\nfn=(2) 0x0000000000498b00\ncfn=(1)\ncalls=2 0\n0 66048\nfn=(3) 0x0000000000498b00'2\ncfn=(4) 0x0000000000470ae0'2\ncalls=1 0\n0 16280\n",
			calls{3, 82328}},
		{"uncompressed names, two positions, Ir second", "positions: instr line\nevents: Dr Ir\nfn=runtime.newstack\ncfn=runtime.copystack\ncalls=4 0x1 9\n0x2 9 7 40\n", calls{4, 40}},
		{"no call of it", "events: Ir\nfn=(1) main.main\ncfn=(2) runtime.copystackx\ncalls=4 0\n0 40\n", calls{}},
	} {
		got, err := parseCalls(strings.NewReader(tc.dump), isCopy)
		if err != nil {
			t.Errorf("%s: %v", tc.name, err)
			continue
		}
		if got != tc.want {
			t.Errorf("%s: got %+v, want %+v", tc.name, got, tc.want)
		}
	}
	if _, err := parseCalls(strings.NewReader("events: Ir\ncfn=runtime.copystack\ncalls=x 0\n0 1\n"), isCopy); err == nil {
		t.Error("calls=x accepted")
	}
}

// funcNames reads a function's entry from the Go function table, which
// every Go binary keeps, stripped or not: here the running test binary's,
// whose entry of parseCalls the runtime knows too.
func TestFuncNames(t *testing.T) {
	bin, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	pc := reflect.ValueOf(parseCalls).Pointer()
	name := runtime.FuncForPC(pc).Name()
	is, err := funcNames(bin, name)
	if err != nil {
		t.Fatal(err)
	}
	for s, want := range map[string]bool{name: true, fmt.Sprintf("0x%016x", pc): true, fmt.Sprintf("0x%016x", pc+1): false,
		name + "x": false, "0xzz": false} {
		if is(s) != want {
			t.Errorf("%s: is(%q) = %v, want %v", name, s, !want, want)
		}
	}
	if _, err := stackCopyNames(bin); err != nil {
		t.Error(err)
	}
	if _, err := funcNames(bin, "no.such.func"); err == nil {
		t.Error("a function that is not there found")
	}
}

func TestCopiesMoved(t *testing.T) {
	w := func(copies int64) window { return window{n: 1000, copies: calls{n: copies}} }
	for _, tc := range []struct {
		name string
		runs []window
		want bool
	}{
		{"none", []window{w(0), w(0)}, false},
		{"a few, both", []window{w(78), w(76)}, false},
		{"one window copies per query", []window{w(1000), w(0)}, true},
		{"the second grows", []window{w(60), w(670)}, true},
		{"not counted", []window{w(-1), w(1000)}, false},
		{"one window", []window{w(1000)}, false},
	} {
		if got := copiesMoved(tc.runs); got != tc.want {
			t.Errorf("%s: %v, want %v", tc.name, got, tc.want)
		}
	}
}
