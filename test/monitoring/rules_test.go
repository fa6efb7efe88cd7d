package monitoring

import (
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"

	"sigs.k8s.io/yaml"
)

// TestRulesPassPromtoolCheck: the PrometheusRule's spec is a rule file that
// promtool accepts (PromQL parses, templates are valid, names are unique).
func TestRulesPassPromtoolCheck(t *testing.T) {
	pr := loadRules(t)
	p := writeRuleFile(t, t.TempDir(), pr)
	out, err := promtool(t, "", "check", "rules", p)
	if err != nil {
		t.Fatalf("promtool check rules %s (the spec of %s): %v\n%s", p, ruleFile, err, out)
	}
	if want := len(alerts(pr)); !strings.Contains(out, "SUCCESS: "+strconv.Itoa(want)+" rules found") {
		t.Errorf("promtool check rules: want %d rules found, got:\n%s", want, out)
	}
}

// TestRulesUnitTestsPass runs promtool test rules: every case of
// testdata/rules_test.yaml (alerts firing with their labels and rendered
// annotations, and not firing) holds for the shipped rules.
func TestRulesUnitTestsPass(t *testing.T) {
	pr := loadRules(t)
	dir := t.TempDir()
	writeRuleFile(t, dir, pr)
	tests := filepath.Join(dir, "rules_test.yaml")
	if err := os.WriteFile(tests, readFile(t, rulesTestFile), 0o644); err != nil {
		t.Fatal(err)
	}
	out, err := promtool(t, "", "test", "rules", tests)
	if err != nil {
		t.Fatalf("promtool test rules %s: %v\n%s", rulesTestFile, err, out)
	}
	if !strings.Contains(out, "SUCCESS") {
		t.Fatalf("promtool test rules: no SUCCESS in:\n%s", out)
	}
}

// TestEveryAlertIsTestedFiringAndNotFiring: each alert has a case in which
// it fires and one in which it does not, and no case names an alert that
// does not exist (its "does not fire" would hold whatever the rules say).
func TestEveryAlertIsTestedFiringAndNotFiring(t *testing.T) {
	var suite struct {
		RuleFiles []string `json:"rule_files"`
		Tests     []struct {
			Name  string `json:"name"`
			Cases []struct {
				Alert     string           `json:"alertname"`
				ExpAlerts []map[string]any `json:"exp_alerts"`
			} `json:"alert_rule_test"`
		} `json:"tests"`
	}
	if err := yaml.Unmarshal(readFile(t, rulesTestFile), &suite); err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(suite.RuleFiles, []string{"rules.yaml"}) {
		t.Errorf("%s: rule_files %v, want [rules.yaml] (the file the tests write)", rulesTestFile, suite.RuleFiles)
	}
	known := map[string]bool{}
	for _, a := range alerts(loadRules(t)) {
		known[a.Alert] = true
	}
	firing, quiet := map[string]bool{}, map[string]bool{}
	for _, tc := range suite.Tests {
		for _, c := range tc.Cases {
			if !known[c.Alert] {
				t.Errorf("%s: test %q names alert %q, which %s does not have", rulesTestFile, tc.Name, c.Alert, ruleFile)
			}
			if len(c.ExpAlerts) > 0 {
				firing[c.Alert] = true
			} else {
				quiet[c.Alert] = true
			}
		}
	}
	for a := range known {
		if !firing[a] {
			t.Errorf("alert %s has no test in which it fires", a)
		}
		if !quiet[a] {
			t.Errorf("alert %s has no test in which it does not fire", a)
		}
	}
}

// TestEveryAlertHasARunbook: a severity that routes (warning or critical),
// a summary, a description and a runbook_url whose anchor is a heading of
// deploy/monitoring/README.md.
func TestEveryAlertHasARunbook(t *testing.T) {
	anchors := map[string]bool{}
	for _, line := range strings.Split(string(readFile(t, readmeFile)), "\n") {
		if h, ok := strings.CutPrefix(line, "### "); ok {
			anchors[githubAnchor(h)] = true
		}
	}
	const base = "https://github.com/fleetdns/fleetdns/blob/main/" + readmeFile + "#"
	for _, a := range alerts(loadRules(t)) {
		if s := a.Labels["severity"]; s != "warning" && s != "critical" {
			t.Errorf("%s: severity %q, want warning or critical", a.Alert, s)
		}
		for _, k := range []string{"summary", "description", "runbook_url"} {
			if a.Annotations[k] == "" {
				t.Errorf("%s: no %s annotation", a.Alert, k)
			}
		}
		u := a.Annotations["runbook_url"]
		anchor, ok := strings.CutPrefix(u, base)
		if !ok {
			t.Errorf("%s: runbook_url %q does not point into %s", a.Alert, u, readmeFile)
			continue
		}
		if anchor != strings.ToLower(a.Alert) {
			t.Errorf("%s: runbook_url anchor %q, want %q (a heading named as the alert)", a.Alert, anchor, strings.ToLower(a.Alert))
		}
		if !anchors[anchor] {
			t.Errorf("%s: %s has no heading ### %s (runbook_url %s)", a.Alert, readmeFile, a.Alert, u)
		}
	}
}

var nonAnchor = regexp.MustCompile(`[^a-z0-9 _-]`)

// githubAnchor is the anchor GitHub gives a heading.
func githubAnchor(h string) string {
	return strings.ReplaceAll(nonAnchor.ReplaceAllString(strings.ToLower(strings.TrimSpace(h)), ""), " ", "-")
}
