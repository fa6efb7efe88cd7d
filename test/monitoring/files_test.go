package monitoring

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/fleetdns/fleetdns/test/harness"
	"sigs.k8s.io/yaml"
)

// The files under test, relative to the module root.
const (
	ruleFile      = "deploy/monitoring/prometheusrule.yaml"
	dashboardFile = "deploy/monitoring/dashboard.json"
	readmeFile    = "deploy/monitoring/README.md"
	rulesTestFile = "test/monitoring/testdata/rules_test.yaml"
)

// rule is one rule of a PrometheusRule group (the fields the tests read).
type rule struct {
	Alert       string            `json:"alert"`
	Record      string            `json:"record"`
	Expr        string            `json:"expr"`
	For         string            `json:"for"`
	Labels      map[string]string `json:"labels"`
	Annotations map[string]string `json:"annotations"`
}

type ruleGroup struct {
	Name  string `json:"name"`
	Rules []rule `json:"rules"`
}

// prometheusRule is the PrometheusRule of deploy/monitoring; its spec is a
// Prometheus rule file as promtool reads it.
type prometheusRule struct {
	Kind string `json:"kind"`
	Spec struct {
		Groups []ruleGroup `json:"groups"`
	} `json:"spec"`
}

func readFile(t *testing.T, rel string) []byte {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(harness.ModuleRoot(t), rel))
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func loadRules(t *testing.T) prometheusRule {
	t.Helper()
	var pr prometheusRule
	if err := yaml.Unmarshal(readFile(t, ruleFile), &pr); err != nil {
		t.Fatalf("%s: %v", ruleFile, err)
	}
	if pr.Kind != "PrometheusRule" || len(pr.Spec.Groups) == 0 {
		t.Fatalf("%s: kind %q with %d groups, want a PrometheusRule with groups", ruleFile, pr.Kind, len(pr.Spec.Groups))
	}
	return pr
}

func alerts(pr prometheusRule) []rule {
	var out []rule
	for _, g := range pr.Spec.Groups {
		for _, r := range g.Rules {
			if r.Alert != "" {
				out = append(out, r)
			}
		}
	}
	return out
}

// writeRuleFile writes the PrometheusRule's spec as a Prometheus rule file
// (rules.yaml) into dir and returns its path.
func writeRuleFile(t *testing.T, dir string, pr prometheusRule) string {
	t.Helper()
	b, err := yaml.Marshal(pr.Spec)
	if err != nil {
		t.Fatal(err)
	}
	p := filepath.Join(dir, "rules.yaml")
	if err := os.WriteFile(p, b, 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

// dashboard is the part of the Grafana dashboard model the tests read.
type dashboard struct {
	UID        string  `json:"uid"`
	Title      string  `json:"title"`
	Panels     []panel `json:"panels"`
	Templating struct {
		List []struct {
			Name       string          `json:"name"`
			Type       string          `json:"type"`
			Query      json.RawMessage `json:"query"`
			Datasource *datasource     `json:"datasource"`
		} `json:"list"`
	} `json:"templating"`
}

type datasource struct {
	Type string `json:"type"`
	UID  string `json:"uid"`
}

type panel struct {
	ID         int         `json:"id"`
	Type       string      `json:"type"`
	Title      string      `json:"title"`
	Datasource *datasource `json:"datasource"`
	Targets    []struct {
		RefID string `json:"refId"`
		Expr  string `json:"expr"`
	} `json:"targets"`
	Panels []panel `json:"panels"` // a collapsed row's
}

func loadDashboard(t *testing.T) dashboard {
	t.Helper()
	var d dashboard
	if err := json.Unmarshal(readFile(t, dashboardFile), &d); err != nil {
		t.Fatalf("%s: %v", dashboardFile, err)
	}
	return d
}

// allPanels flattens rows.
func allPanels(ps []panel) []panel {
	var out []panel
	for _, p := range ps {
		out = append(out, p)
		out = append(out, allPanels(p.Panels)...)
	}
	return out
}

// query is one PromQL expression of the dashboard, with where it is.
type query struct{ where, expr string }

// dashboardQueries are the panels' expressions and the query variables'
// label_values(...) queries.
func dashboardQueries(t *testing.T, d dashboard) []query {
	t.Helper()
	var out []query
	for _, p := range allPanels(d.Panels) {
		for _, tg := range p.Targets {
			out = append(out, query{"panel " + p.Title + " " + tg.RefID, tg.Expr})
		}
	}
	for _, v := range d.Templating.List {
		if v.Type != "query" {
			continue
		}
		var q struct {
			Query string `json:"query"`
		}
		if err := json.Unmarshal(v.Query, &q); err != nil {
			var s string
			if json.Unmarshal(v.Query, &s) != nil {
				t.Fatalf("variable %s: query is neither an object nor a string: %s", v.Name, v.Query)
			}
			q.Query = s
		}
		out = append(out, query{"variable " + v.Name, q.Query})
	}
	return out
}

// grafanaToPromQL replaces Grafana's variables with values PromQL parses,
// and label_values(SELECTOR, LABEL) with SELECTOR.
func grafanaToPromQL(expr string) string {
	expr = strings.NewReplacer("$__rate_interval", "5m", "$__interval", "1m", "$__range", "1h",
		`"$job"`, `".+"`, `"$instance"`, `".+"`).Replace(expr)
	if rest, ok := strings.CutPrefix(expr, "label_values("); ok {
		if i := strings.LastIndex(rest, ","); i >= 0 {
			expr = strings.TrimSpace(rest[:i])
		}
	}
	return expr
}

// promtool runs promtool with args and returns its output; a missing
// promtool goes through harness.Missing.
func promtool(t *testing.T, stdin string, args ...string) (string, error) {
	t.Helper()
	bin := harness.LookPath(t, "promtool")
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	if stdin != "" {
		return harness.RunStdin(ctx, stdin, bin, args...)
	}
	return harness.Run(ctx, bin, args...)
}
