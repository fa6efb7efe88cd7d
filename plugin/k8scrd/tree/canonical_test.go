package tree

import (
	"strings"
	"testing"
)

// RFC 4034 §6.1: the order of a zone transfer.
func TestSortCanonicalLabelByLabelFromTheRight(t *testing.T) {
	names := []string{"z.example.org.", "example.org.", "a.z.example.org.", "*.example.org.", "b.example.org.", "yljkjljk.a.example.org.", "a.example.org."}
	SortCanonical(names)
	want := []string{"example.org.", "*.example.org.", "a.example.org.", "yljkjljk.a.example.org.", "b.example.org.", "z.example.org.", "a.z.example.org."}
	if strings.Join(names, " ") != strings.Join(want, " ") {
		t.Errorf("got  %v\nwant %v", names, want)
	}
}
