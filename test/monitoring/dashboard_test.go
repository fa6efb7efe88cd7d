package monitoring

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"sigs.k8s.io/yaml"
)

// TestDashboardQueriesParse checks every expression of the dashboard with
// promtool, as recording rules (Grafana's variables replaced by values), so
// that a typo shows here rather than as an empty panel.
func TestDashboardQueriesParse(t *testing.T) {
	qs := dashboardQueries(t, loadDashboard(t))
	if len(qs) == 0 {
		t.Fatalf("%s has no queries", dashboardFile)
	}
	var rules []map[string]string
	for i, q := range qs {
		rules = append(rules, map[string]string{"record": fmt.Sprintf("dashboard:query_%d", i), "expr": grafanaToPromQL(q.expr)})
	}
	b, err := yaml.Marshal(map[string]any{"groups": []any{map[string]any{"name": "dashboard", "rules": rules}}})
	if err != nil {
		t.Fatal(err)
	}
	p := filepath.Join(t.TempDir(), "dashboard-queries.yaml")
	if err := os.WriteFile(p, b, 0o644); err != nil {
		t.Fatal(err)
	}
	if out, err := promtool(t, "", "check", "rules", p); err != nil {
		// promtool names the failing rule by index: map it back.
		var where []string
		for i, q := range qs {
			if strings.Contains(out, fmt.Sprintf("dashboard:query_%d", i)) || strings.Contains(out, fmt.Sprintf("%d:", i+1)) {
				where = append(where, q.where+": "+q.expr)
			}
		}
		t.Fatalf("promtool check rules on the dashboard's queries: %v\n%s\n%s", err, out, strings.Join(where, "\n"))
	}
}

// TestDashboardPanelsUseTheDatasourceVariable: every panel and query
// variable reads the dashboard's datasource variable (so the dashboard
// imports into any Grafana), panel ids are unique, and every panel that is
// not a row has a query.
func TestDashboardPanelsUseTheDatasourceVariable(t *testing.T) {
	d := loadDashboard(t)
	if d.UID == "" || d.Title == "" {
		t.Errorf("dashboard uid %q title %q: both are needed for a stable import", d.UID, d.Title)
	}
	const want = "${datasource}"
	ids := map[int]string{}
	for _, p := range allPanels(d.Panels) {
		if other, dup := ids[p.ID]; dup {
			t.Errorf("panels %q and %q share id %d", other, p.Title, p.ID)
		}
		ids[p.ID] = p.Title
		if p.Type == "row" {
			continue
		}
		if p.Datasource == nil || p.Datasource.UID != want || p.Datasource.Type != "prometheus" {
			t.Errorf("panel %q: datasource %+v, want prometheus %s", p.Title, p.Datasource, want)
		}
		if len(p.Targets) == 0 {
			t.Errorf("panel %q has no query", p.Title)
		}
		for _, tg := range p.Targets {
			if !strings.Contains(tg.Expr, `job=~"$job"`) || !strings.Contains(tg.Expr, `instance=~"$instance"`) {
				t.Errorf("panel %q query %s ignores the job or instance variable: %s", p.Title, tg.RefID, tg.Expr)
			}
		}
	}
	vars := map[string]bool{}
	for _, v := range d.Templating.List {
		vars[v.Name] = true
		if v.Type == "query" && (v.Datasource == nil || v.Datasource.UID != want) {
			t.Errorf("variable %s: datasource %+v, want %s", v.Name, v.Datasource, want)
		}
	}
	for _, v := range []string{"datasource", "job", "instance"} {
		if !vars[v] {
			t.Errorf("dashboard has no variable %s", v)
		}
	}
}
