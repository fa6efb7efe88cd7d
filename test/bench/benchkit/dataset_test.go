package benchkit

import (
	"fmt"
	"os"
	"slices"
	"strings"
	"testing"
)

// Every query the generated files hold has an expectation of the kind the
// mix promises, and the expected records are in the zone file written.
func TestDatasetExpect(t *testing.T) {
	d, err := GenDataset(t.TempDir(), 100)
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name, qtype, rcode string
		answer             []string
	}{
		{"host-7.example.bench.", "A", "NOERROR", []string{"A 10.0.0.7"}},
		{"host-8.example.bench.", "AAAA", "NOERROR", []string{"AAAA fd00::0:8"}},
		{"host-7.example.bench.", "AAAA", "NOERROR", nil}, // NODATA
		{"alias-20.example.bench.", "A", "NOERROR", []string{"CNAME host-20.example.bench.", "A 10.0.0.20"}},
		{"alias-21.example.bench.", "A", "NXDOMAIN", nil},
		{"host-100.example.bench.", "A", "NXDOMAIN", nil}, // one past the last
		{"host-07.example.bench.", "A", "NXDOMAIN", nil},
		{"missing-3.example.bench.", "A", "NXDOMAIN", nil},
		{"0badf00d.example.bench.", "A", "NXDOMAIN", nil},
		{"host-1.other.", "A", "REFUSED", nil},
	} {
		rcode, answer := d.Expect(tc.name, tc.qtype)
		if rcode != tc.rcode || !slices.Equal(answer, tc.answer) {
			t.Errorf("%s %s: got %s %v, want %s %v", tc.name, tc.qtype, rcode, answer, tc.rcode, tc.answer)
		}
	}
	zone, err := os.ReadFile(d.ZoneFile)
	if err != nil {
		t.Fatal(err)
	}
	kinds := map[string]int{}
	for _, file := range []string{d.Hits, d.Mix} {
		b, err := os.ReadFile(file)
		if err != nil {
			t.Fatal(err)
		}
		for _, line := range strings.Split(strings.TrimSpace(string(b)), "\n") {
			f := strings.Fields(line)
			rcode, answer := d.Expect(f[0], f[1])
			switch {
			case rcode == "NXDOMAIN":
				kinds["nxdomain"]++
			case len(answer) == 0:
				kinds["nodata"]++
			case len(answer) == 2:
				kinds["cname"]++
			default:
				kinds["hit"]++
			}
			for _, rr := range answer {
				typ, rdata, _ := strings.Cut(rr, " ")
				owner := f[0]
				if typ == "A" && len(answer) == 2 {
					owner = strings.TrimPrefix(answer[0], "CNAME ")
				}
				if !strings.Contains(string(zone), fmt.Sprintf("\n%s 30 IN %s %s\n", owner, typ, rdata)) {
					t.Fatalf("%s: expected %s is not in the zone file", line, rr)
				}
			}
		}
	}
	for _, k := range []string{"hit", "nodata", "cname", "nxdomain"} {
		if kinds[k] == 0 {
			t.Errorf("no %s query in the files (%v)", k, kinds)
		}
	}
}
