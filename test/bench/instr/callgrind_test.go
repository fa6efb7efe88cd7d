package main

import (
	"math"
	"os"
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
