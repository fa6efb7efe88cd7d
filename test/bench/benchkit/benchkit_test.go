package benchkit

import (
	"os"
	"syscall"
	"testing"
	"time"
)

// testdata/dnsperf.txt is dnsperf 2.10.0's output against test/bench/bare;
// testdata/dnsperf-lost.txt against an address nobody listens on.
func TestParseDNSPerf(t *testing.T) {
	for _, tc := range []struct {
		file string
		want DNSPerf
	}{
		{"testdata/dnsperf.txt", DNSPerf{QPS: 14277.308691, Completed: 31593, Lost: 0, LostPct: 0, AvgLatency: 0.004382}},
		{"testdata/dnsperf-lost.txt", DNSPerf{QPS: 0, Completed: 0, Lost: 10, LostPct: 100, AvgLatency: 0}},
		{"benchkit.go", DNSPerf{}}, // not dnsperf output: every field zero
	} {
		out, err := os.ReadFile(tc.file)
		if err != nil {
			t.Fatal(err)
		}
		if got := ParseDNSPerf(out); got != tc.want {
			t.Errorf("%s: got %+v, want %+v", tc.file, got, tc.want)
		}
	}
}

func TestUSPerQuery(t *testing.T) {
	if got := (DNSPerf{Completed: 20000}).USPerQuery(50); got != 25 { // 0.5 s over 20,000 queries
		t.Errorf("got %v us/query, want 25", got)
	}
	if got := (DNSPerf{}).USPerQuery(50); got != 0 {
		t.Errorf("no query completed: got %v, want 0", got)
	}
}

func TestMedian(t *testing.T) {
	for _, tc := range []struct {
		in   []float64
		want float64
	}{
		{nil, 0},
		{[]float64{7}, 7},
		{[]float64{3, 1, 2}, 2},
		{[]float64{4, 1, 3, 2}, 2.5},
		{[]float64{5, 5, 1, 9, 5}, 5},
	} {
		in := append([]float64(nil), tc.in...)
		if got := Median(tc.in); got != tc.want {
			t.Errorf("Median(%v) = %v, want %v", tc.in, got, tc.want)
		}
		for i := range in {
			if in[i] != tc.in[i] {
				t.Fatalf("Median sorted its argument: %v", tc.in)
			}
		}
	}
}

func TestStatOf(t *testing.T) {
	s := StatOf([]float64{30, 10, 20, 40})
	if s != (Stat{25, 10, 40}) {
		t.Errorf("got %+v", s)
	}
	if got := s.Format("%.1f"); got != "25.0 (10.0-40.0)" {
		t.Errorf("Format = %q", got)
	}
	if StatOf(nil) != (Stat{}) {
		t.Errorf("StatOf(nil) = %+v", StatOf(nil))
	}
}

func TestPercentile(t *testing.T) {
	ms := func(v ...int) []time.Duration {
		var out []time.Duration
		for _, x := range v {
			out = append(out, time.Duration(x)*time.Millisecond)
		}
		return out
	}
	hundred := make([]int, 100)
	for i := range hundred {
		hundred[i] = 100 - i // 100 ... 1, unsorted
	}
	for _, tc := range []struct {
		in   []time.Duration
		p    int
		want time.Duration
	}{
		{nil, 50, 0},
		{ms(5), 99, 5 * time.Millisecond},
		{ms(hundred...), 50, 50 * time.Millisecond},
		{ms(hundred...), 99, 99 * time.Millisecond},
		{ms(hundred...), 100, 100 * time.Millisecond},
		{ms(hundred...), 0, 1 * time.Millisecond},
		// Nearest rank: 7 values, p30 is rank ceil(2.1) = 3.
		{ms(70, 10, 60, 20, 50, 30, 40), 30, 30 * time.Millisecond},
		{ms(70, 10, 60, 20, 50, 30, 40), 50, 40 * time.Millisecond},
	} {
		if got := Percentile(tc.in, tc.p); got != tc.want {
			t.Errorf("Percentile(%v, %d) = %v, want %v", tc.in, tc.p, got, tc.want)
		}
	}
}

func TestPinned(t *testing.T) {
	if got := Pinned("", "dnsperf", "-s", "x"); len(got) != 3 || got[0] != "dnsperf" {
		t.Errorf("unpinned: %v", got)
	}
	if got := Pinned("1", "dnsperf"); len(got) != 4 || got[0] != "taskset" || got[2] != "1" || got[3] != "dnsperf" {
		t.Errorf("pinned: %v", got)
	}
}

func TestCPUTicks(t *testing.T) {
	// This process has run for some time; its group includes itself.
	deadline := time.Now().Add(200 * time.Millisecond)
	for time.Now().Before(deadline) {
	}
	own, err := CPUTicks(os.Getpid())
	if err != nil || own <= 0 {
		t.Fatalf("CPUTicks(self) = %d, %v", own, err)
	}
	grp, err := GroupCPUTicks(os.Getpid())
	if err != nil {
		t.Fatal(err)
	}
	if pgid, _ := syscall.Getpgid(0); pgid == os.Getpid() && grp < own {
		t.Errorf("group %d ticks < own %d", grp, own)
	}
	if _, err := CPUTicks(-1); err == nil {
		t.Error("CPUTicks(-1): no error")
	}
}
