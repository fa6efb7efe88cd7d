package benchkit

import (
	"os"
	"testing"
)

func TestParseResperf(t *testing.T) {
	out, err := os.ReadFile("testdata/resperf.txt")
	if err != nil {
		t.Fatal(err)
	}
	got := ParseResperf(out)
	want := Resperf{MaxQPS: 13420, LostPct: 10.38, Sent: 140827, Done: 44696}
	if got != want {
		t.Errorf("ParseResperf = %+v, want %+v", got, want)
	}
	if z := ParseResperf([]byte("resperf: invalid option\n")); z != (Resperf{}) {
		t.Errorf("ParseResperf of an error = %+v, want zero", z)
	}
}
