package corefile

import (
	"strings"
	"testing"
	"time"

	"github.com/coredns/caddy"
)

// properties reads a directive's block as a plugin does: each property with
// its arguments, and a property's own block ("name {" then its properties).
func properties(c *caddy.Controller) []string {
	var out []string
	for c.Next() {
		out = append(out, strings.Join(append([]string{c.Val()}, Args(c)...), " "))
		for c.NextBlock() {
			out = append(out, strings.Join(append([]string{c.Val()}, Args(c)...), " "))
			if OpensBlock(c) {
				out = append(out, "{")
				for c.NextBlock() {
					out = append(out, " "+strings.Join(append([]string{c.Val()}, Args(c)...), " "))
				}
				out = append(out, "}")
			}
		}
	}
	return out
}

func TestOneLineBlockReadsAsMultiLine(t *testing.T) {
	for _, tc := range []struct{ multi, oneLine string }{
		{"k8scrd {\n directory /etc/zones\n}", "k8scrd { directory /etc/zones }"},
		{"k8scrd example.org {\n fallthrough\n}", "k8scrd example.org { fallthrough }"},
		{"gslb example.com {\n geotag eu\n}", "gslb example.com { geotag eu }"},
		{"gslb example.com {\n geotag eu\n peer us 10.0.0.1 10.0.0.2\n}", "gslb example.com {\n geotag eu\n peer us 10.0.0.1 10.0.0.2 }"},
		{
			"localtargets {\n healthcheck tcp 80 {\n interval 5s\n }\n}",
			"localtargets { healthcheck tcp 80 { interval 5s } }",
		},
		{
			"localtargets {\n healthcheck tcp 80 {\n interval 5s\n }\n prefix lt-\n}",
			"localtargets {\n healthcheck tcp 80 { interval 5s }\n prefix lt-\n}",
		},
		{
			"gslb example.com {\n peers_from_ns 10.0.0.1 {\n pattern ns-{geotag}.{zone}\n }\n geotag eu\n}",
			"gslb example.com {\n peers_from_ns 10.0.0.1 { pattern ns-{geotag}.{zone} }\n geotag eu }",
		},
		{"localtargets {\n healthcheck tcp 80 {\n }\n}", "localtargets { healthcheck tcp 80 { } }"},
		{"splitdns {\n}", "splitdns { }"},
	} {
		want := properties(caddy.NewTestController("dns", tc.multi))
		got := properties(caddy.NewTestController("dns", tc.oneLine))
		if strings.Join(got, "\n") != strings.Join(want, "\n") {
			t.Errorf("%q reads as %q, want %q as on several lines", tc.oneLine, got, want)
		}
	}
}

func TestArgsLeaveTheCursorForArgErr(t *testing.T) {
	for _, tc := range []struct {
		input string
		args  int
		want  string
	}{
		{"k8scrd { ttl }", 0, "Testfile:1 - Error during parsing: Wrong argument count or unexpected line ending after 'ttl'"},
		{"k8scrd { ttl 30 40 }", 2, "Testfile:1 - Error during parsing: Wrong argument count or unexpected line ending after '40'"},
		{"k8scrd {\n ttl 30 40\n}", 2, "Testfile:2 - Error during parsing: Wrong argument count or unexpected line ending after '40'"},
		{"k8scrd {\n ttl\n 30 }", 0, "Testfile:2 - Error during parsing: Wrong argument count or unexpected line ending after 'ttl'"},
	} {
		c := caddy.NewTestController("dns", tc.input)
		c.Next()
		Args(c)
		if !c.NextBlock() {
			t.Fatalf("%q: no block", tc.input)
		}
		if args := Args(c); len(args) != tc.args {
			t.Errorf("%q: args %q, want %d", tc.input, args, tc.args)
		}
		if err := c.ArgErr(); err.Error() != tc.want {
			t.Errorf("%q: ArgErr %q, want %q", tc.input, err, tc.want)
		}
	}
}

func TestNextArgStopsAtBraces(t *testing.T) {
	c := caddy.NewTestController("dns", "gslb example.com { geotag eu }")
	var seen []string
	for c.Next() {
		for NextArg(c) {
			seen = append(seen, c.Val())
		}
		for c.NextBlock() {
			seen = append(seen, c.Val())
			for NextArg(c) {
				seen = append(seen, c.Val())
			}
		}
	}
	if got := strings.Join(seen, " "); got != "example.com geotag eu" {
		t.Errorf("read %q, want the arguments without braces", got)
	}
}

func TestOpensBlockOnlyOnTheSameLine(t *testing.T) {
	for _, tc := range []struct {
		input string
		want  bool
	}{
		{"localtargets {\n healthcheck tcp 80 {\n interval 5s\n }\n}", true},
		{"localtargets {\n healthcheck tcp 80 { interval 5s }\n}", true},
		{"localtargets {\n healthcheck tcp 80\n prefix lt-\n}", false},
		{"localtargets { healthcheck tcp 80 }", false},
	} {
		c := caddy.NewTestController("dns", tc.input)
		c.Next()
		c.NextBlock()
		Args(c)
		if got := OpensBlock(c); got != tc.want {
			t.Errorf("%q: OpensBlock %v, want %v", tc.input, got, tc.want)
		}
		if c.Val() != "80" {
			t.Errorf("%q: OpensBlock moved the cursor to %q", tc.input, c.Val())
		}
	}
}

func TestDuration(t *testing.T) {
	for _, tc := range []struct {
		input string
		least time.Duration
		want  time.Duration
		err   string
	}{
		{"p { timeout 250ms }", time.Millisecond, 250 * time.Millisecond, ""},
		{"p {\n timeout 2s\n}", time.Nanosecond, 2 * time.Second, ""},
		{"p { threshold 0s }", 0, 0, ""},
		{"p { timeout }", time.Millisecond, 0, "Testfile:1 - Error during parsing: Wrong argument count or unexpected line ending after 'timeout'"},
		{"p { timeout 1s 2s }", time.Millisecond, 0, "Testfile:1 - Error during parsing: Wrong argument count or unexpected line ending after '2s'"},
		{"p {\n timeout soon\n}", time.Millisecond, 0, `Testfile:2 - Error during parsing: bad timeout "soon": not a positive duration`},
		{"p { timeout 0s }", time.Nanosecond, 0, `Testfile:1 - Error during parsing: bad timeout "0s": not a positive duration`},
		{"p { threshold soon }", 0, 0, `Testfile:1 - Error during parsing: bad threshold "soon": not a duration`},
		{"p { threshold -1s }", 0, 0, "Testfile:1 - Error during parsing: threshold -1s is below 0s"},
		{"p { refresh 10ms }", time.Second, 0, "Testfile:1 - Error during parsing: refresh 10ms is below 1s"},
	} {
		c := caddy.NewTestController("dns", tc.input)
		c.Next()
		c.NextBlock()
		d, err := Duration(c, tc.least)
		switch {
		case tc.err == "" && err != nil:
			t.Errorf("%q: %v", tc.input, err)
		case tc.err == "" && d != tc.want:
			t.Errorf("%q: %s, want %s", tc.input, d, tc.want)
		case tc.err != "" && (err == nil || err.Error() != tc.err):
			t.Errorf("%q: error %v, want %q", tc.input, err, tc.err)
		}
	}
}

func TestPrefixes(t *testing.T) {
	c := caddy.NewTestController("dns", "allow 127.0.0.0/8 10.1.2.3 fd00::1 192.0.2.77/24")
	c.Next()
	got, err := Prefixes(c)
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"127.0.0.0/8", "10.1.2.3/32", "fd00::1/128", "192.0.2.0/24"}
	if len(got) != len(want) {
		t.Fatalf("Prefixes = %v, want %v", got, want)
	}
	for i := range want {
		if got[i].String() != want[i] {
			t.Errorf("Prefixes[%d] = %s, want %s (masked; an address is its host prefix)", i, got[i], want[i])
		}
	}
	for _, bad := range []string{"allow", "allow 10.0.0.0/33", "allow nonsense"} {
		c := caddy.NewTestController("dns", bad)
		c.Next()
		if _, err := Prefixes(c); err == nil || !strings.Contains(err.Error(), "Testfile:1") {
			t.Errorf("%q: error %v, want one naming the line", bad, err)
		}
	}
}
