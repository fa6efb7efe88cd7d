package monitoring

import (
	"fmt"
	"net"
	"regexp"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/fleetdns/fleetdns/internal/testkit"
	"github.com/fleetdns/fleetdns/test/harness"
	"github.com/miekg/dns"
)

// The zones of the instance that TestEveryReferencedMetricIsExported starts.
const (
	parentZone = "parent.test"
	gslbZone   = "gslb.parent.test"
)

var (
	// reStrings, reBraces, reRanges and reGrouping remove what holds no
	// metric name: string literals, label matchers, ranges and subqueries,
	// and the label lists of by/without/on/ignoring/group_left/group_right.
	reStrings  = regexp.MustCompile(`"(?:[^"\\]|\\.)*"|'(?:[^'\\]|\\.)*'|` + "`[^`]*`")
	reBraces   = regexp.MustCompile(`\{[^{}]*\}`)
	reRanges   = regexp.MustCompile(`\[[^\[\]]*\]`)
	reGrouping = regexp.MustCompile(`\b(?:by|without|on|ignoring|group_left|group_right)\s*\([^()]*\)`)
	// reToken finds numbers (skipped, so that 1e3 is not read as e3) and
	// identifiers, with the "(" that makes one a function call.
	reToken = regexp.MustCompile(`[0-9][0-9.]*(?:[eE][+-]?[0-9]+)?[a-z]*|([a-zA-Z_:][a-zA-Z0-9_:]*)(\s*\()?`)
	// promqlWords are PromQL's keywords that are not followed by "(".
	promqlWords = map[string]bool{"and": true, "or": true, "unless": true, "bool": true, "offset": true,
		"by": true, "without": true, "on": true, "ignoring": true, "group_left": true, "group_right": true,
		"inf": true, "nan": true, "Inf": true, "NaN": true}
)

// metricNames returns the metric names that a PromQL expression selects:
// the identifiers that are neither functions, aggregations nor keywords.
func metricNames(expr string) []string {
	s := reStrings.ReplaceAllString(expr, `""`)
	for prev := ""; prev != s; {
		prev = s
		s = reBraces.ReplaceAllString(s, "")
		s = reRanges.ReplaceAllString(s, "")
	}
	s = reGrouping.ReplaceAllString(s, "")
	var out []string
	for _, m := range reToken.FindAllStringSubmatch(s, -1) {
		name, call := m[1], m[2] != ""
		if name == "" || call || promqlWords[name] {
			continue
		}
		out = append(out, name)
	}
	return out
}

// TestMetricNamesFindsSelectors pins metricNames on the shapes the rules and
// the dashboard use.
func TestMetricNamesFindsSelectors(t *testing.T) {
	for _, c := range []struct {
		expr string
		want []string
	}{
		{`sum by (zone, peer) (coredns_gslb_peer_state{state="down", job=~"a|b"}) > 0`, []string{"coredns_gslb_peer_state"}},
		{`time() - coredns_k8scrd_last_sync_timestamp_seconds > 6e2 and on (job, instance) increase(coredns_k8scrd_sync_errors_total[10m]) > 0`,
			[]string{"coredns_k8scrd_last_sync_timestamp_seconds", "coredns_k8scrd_sync_errors_total"}},
		{`histogram_quantile(0.99, sum(rate(x_bucket{le!="+Inf"}[5m])) by (le))`, []string{"x_bucket"}},
		{grafanaToPromQL(`label_values(coredns_build_info{job=~"$job"}, instance)`), []string{"coredns_build_info"}},
		{grafanaToPromQL(`rate(coredns_dns_requests_total{job=~"$job"}[$__rate_interval]) or vector(0)`), []string{"coredns_dns_requests_total"}},
	} {
		if got := metricNames(c.expr); !slices.Equal(got, c.want) {
			t.Errorf("metricNames(%s) = %v, want %v", c.expr, got, c.want)
		}
	}
}

// referencedMetrics maps every metric name that the rules and the dashboard
// select to where it is used.
func referencedMetrics(t *testing.T) map[string][]string {
	t.Helper()
	refs := map[string][]string{}
	add := func(where, expr string) {
		names := metricNames(expr)
		if len(names) == 0 {
			t.Errorf("%s selects no metric: %s", where, expr)
		}
		for _, n := range names {
			refs[n] = append(refs[n], where)
		}
	}
	for _, a := range alerts(loadRules(t)) {
		add("alert "+a.Alert, a.Expr)
	}
	for _, q := range dashboardQueries(t, loadDashboard(t)) {
		add("dashboard "+q.where, grafanaToPromQL(q.expr))
	}
	return refs
}

// exposition returns the names a /metrics page has series of, and the
// names of its # HELP lines (with the _bucket, _sum and _count series names
// of histograms and summaries).
func exposition(page string) (series, described map[string]bool) {
	series, described = map[string]bool{}, map[string]bool{}
	for _, line := range strings.Split(page, "\n") {
		if f, ok := strings.CutPrefix(line, "# HELP "); ok {
			described[strings.Fields(f)[0]] = true
			continue
		}
		if f, ok := strings.CutPrefix(line, "# TYPE "); ok {
			if w := strings.Fields(f); len(w) == 2 && (w[1] == "histogram" || w[1] == "summary") {
				for _, s := range []string{"_bucket", "_sum", "_count"} {
					described[w[0]+s] = true
				}
			}
			continue
		}
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		if i := strings.IndexAny(line, "{ "); i > 0 {
			series[line[:i]] = true
		}
	}
	return series, described
}

// TestEveryReferencedMetricIsExported starts the built coredns with a
// Corefile that loads every plugin whose metrics the rules and the
// dashboard use, and exercises it so that the labelled metrics have series:
//
//   - gslb.parent.test: localtargets with a tcp health check of this
//     server's own DNS port, gslb discovering its peers from the parent
//     block (peer b is this server, up; peer c an address where nothing
//     listens, down), k8scrd from a folder holding an endpoint of an
//     unknown type (invalid), a name two namespaces claim (refused, tenancy
//     strict) and a folder named like a manifest (a read error);
//   - gslb2.parent.test: a gslb zone that the parent does not delegate
//     (discovery errors);
//   - parent.test on a port of its own: the delegation and glue;
//   - rrl.test: rrl at 1 response a second, asked 20 times;
//   - split.test and dead.test: splitdns with a loopback upstream (another
//     block of this server) and a dead one;
//   - fwd.test: forward to the dead address (health check failures).
//
// The client library writes no # HELP line for a labelled metric that has
// no series yet, so a name counts as exported only when /metrics shows it
// (series or HELP). promtool check metrics lints the page.
func TestEveryReferencedMetricIsExported(t *testing.T) {
	refs := referencedMetrics(t)
	for n, where := range refs {
		if !strings.HasPrefix(n, "coredns_") {
			t.Errorf("%s uses %s: not a coredns_ metric, so this test's instance cannot show it", strings.Join(where, ", "), n)
		}
	}

	ip := harness.NewIP(t)
	dead := harness.NewIP(t) // reserved, nothing listens on it
	parentPort := harness.FreePort(t, ip)
	upstreamPort := harness.FreePort(t, ip)
	metrics := harness.HostPort(t, ip)
	files := map[string]string{
		"gslb/hosts.yaml": testkit.DNSEndpoint("a", "hosts", nil,
			testkit.EP("app."+gslbZone, "A", 5, ip),
			testkit.EP("dup."+gslbZone, "A", 5, ip),
			testkit.EP("bad."+gslbZone, "BOGUS", 5, "x"),
		),
		"gslb/other.yaml":               testkit.DNSEndpoint("b", "claim", nil, testkit.EP("dup."+gslbZone, "A", 5, dead)),
		"gslb/unreadable.yaml/keep.txt": "a folder named like a manifest cannot be read\n",
		"gslb2/hosts.yaml":              testkit.DNSEndpoint("a", "hosts", nil, testkit.EP("app.gslb2."+parentZone, "A", 5, ip)),
		"parent/delegation.yaml": testkit.DNSEndpoint("default", "delegation", nil,
			testkit.EP(gslbZone, "NS", 60, "gslb-ns-a."+gslbZone, "gslb-ns-b."+gslbZone, "gslb-ns-c."+gslbZone),
			testkit.EP("gslb-ns-a."+gslbZone, "A", 60, ip),
			testkit.EP("gslb-ns-b."+gslbZone, "A", 60, ip),
			testkit.EP("gslb-ns-c."+gslbZone, "A", 60, dead),
		),
	}
	corefile := fmt.Sprintf(`%[3]s:53 {
    bind %[1]s
    prometheus %[4]s
    localtargets {
        healthcheck tcp 53 {
            interval 1s
            timeout 200ms
            allow %[1]s/32
        }
    }
    gslb %[3]s {
        geotag a
        peers_from_ns %[1]s:%[5]d {
            refresh 1s
            allow %[1]s/32 %[2]s/32
        }
        timeout 200ms
        refresh 1s
        split_brain_threshold 1s
    }
    k8scrd %[3]s {
        directory gslb
        tenancy strict
    }
}
gslb2.%[7]s:53 {
    bind %[1]s
    gslb gslb2.%[7]s {
        geotag a
        peers_from_ns %[1]s:%[5]d {
            refresh 1s
        }
        timeout 200ms
    }
    k8scrd gslb2.%[7]s {
        directory gslb2
    }
}
%[7]s:%[5]d {
    bind %[1]s
    k8scrd %[7]s {
        directory parent
    }
}
rrl.test:53 {
    bind %[1]s
    rrl {
        responses_per_second 1
        window 2
        slip 2
    }
    template IN A rrl.test {
        answer "{{ .Name }} 60 IN A %[1]s"
    }
}
split.test:%[6]d {
    bind %[1]s
    template IN A split.test {
        answer "{{ .Name }} 60 IN A %[1]s"
    }
}
split.test:53 dead.test:53 {
    bind %[1]s
    splitdns {
        route split.test %[1]s:%[6]d
        route dead.test %[2]s:53
        timeout 200ms
        health_check 100ms
    }
}
fwd.test:53 {
    bind %[1]s
    forward . %[2]s:53 {
        health_check 100ms
    }
}
`, ip, dead, gslbZone, metrics, parentPort, upstreamPort, parentZone)
	var opts []harness.Option
	for name, content := range files {
		opts = append(opts, harness.WithFile(name, content))
	}
	srv := harness.StartCoreDNS(t, corefile, append(opts, harness.WithDNSAddr(net.JoinHostPort(ip, "53")),
		harness.WithProbe("app."+gslbZone, dns.TypeA))...)

	addr := net.JoinHostPort(ip, "53")
	ask := func(name string) {
		// Answers do not matter here (other tests check them); a timeout
		// of a rate-limited or dead name is expected.
		_, _ = harness.Ask(addr, name, dns.TypeA, harness.Timeout(300*time.Millisecond), harness.Attempts(1))
	}
	url := "http://" + metrics + "/metrics"
	var page string
	var missing []string
	msg, ok := testkit.Within(20*time.Second, func() (bool, string) {
		for _, n := range []string{"app." + gslbZone, "localtargets-app." + gslbZone, "x.split.test", "x.dead.test", "x.fwd.test"} {
			ask(n)
		}
		for range 10 {
			ask("x.rrl.test")
		}
		page = harness.HTTPBody(t, url)
		series, described := exposition(page)
		missing = missing[:0]
		for n := range refs {
			if !series[n] && !described[n] {
				missing = append(missing, n)
			}
		}
		sort.Strings(missing)
		return len(missing) == 0, fmt.Sprintf("not on %s: %v", url, missing)
	})
	if !ok {
		for _, n := range missing {
			t.Errorf("%s is used by %s but not exported", n, strings.Join(refs[n], "; "))
		}
		t.Fatalf("%s\n--- coredns log ---\n%s", msg, srv.Log())
	}
	t.Logf("%d metric names used by the rules and the dashboard, all exported", len(refs))

	if out, err := promtool(t, page, "check", "metrics"); err != nil {
		t.Errorf("promtool check metrics on %s: %v\n%s", url, err, out)
	}
}
