package store

import "testing"

func TestClassify(t *testing.T) {
	tests := []struct {
		h    Host
		want Kind
	}{
		{Host{Name: "app.example.org.", AddressDeclared: true}, Address},
		{Host{Name: "app.example.org."}, ZoneData}, // a CNAME or TXT only
		{Host{Name: "app.example.org.", AddressDeclared: true, Verbatim: true}, Verbatim},
		{Host{Name: "localtargets-app.example.org.", AddressDeclared: true, Verbatim: true}, LocalTargets},
		{Host{Name: "localtargets-app.example.org.", AddressDeclared: true}, LocalTargets},
		{Host{Name: "localtargets-.example.org.", AddressDeclared: true}, Address}, // nothing after the prefix
		{Host{Name: "mylocaltargets-app.example.org.", AddressDeclared: true}, Address},
	}
	for _, tc := range tests {
		if got := Classify(&tc.h, DefaultPrefix); got != tc.want {
			t.Errorf("Classify(%+v) = %s, want %s", tc.h, got, tc.want)
		}
	}
}

func TestTargetHost(t *testing.T) {
	tests := []struct{ name, host string }{
		{"localtargets-app.example.org.", "app.example.org."},
		{"localtargets-a.b.example.org.", "a.b.example.org."},
		{"localtargets-.example.org.", ""},
		{"localtargets-", ""},
		{"app.example.org.", ""},
	}
	for _, tc := range tests {
		host, ok := TargetHost(tc.name, DefaultPrefix)
		if host != tc.host || ok != (tc.host != "") {
			t.Errorf("TargetHost(%q) = %q, %v; want %q", tc.name, host, ok, tc.host)
		}
	}
}
