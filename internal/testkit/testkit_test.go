package testkit

import (
	"encoding/json"
	"errors"
	"reflect"
	"testing"
	"time"

	"sigs.k8s.io/yaml"
)

// TestDNSEndpointYAMLIsTheObject reads the YAML back as k8scrd and kubectl
// do (YAML to JSON) and compares it with the unstructured object: every
// value, however awkward, arrives as given.
func TestDNSEndpointYAMLIsTheObject(t *testing.T) {
	eps := []Endpoint{
		EP("*.apps.example.org", "A", 30, "192.0.2.1", "192.0.2.2"),
		EP("declared.example.org", "A", 0),
		{DNSName: "app.gslb.example.org", RecordType: "A", Targets: []string{"10.0.0.1"}, TTL: 5, SetIdentifier: "eu",
			Labels:           map[string]string{"strategy": "failover", "weight-eu-0-50": ""},
			ProviderSpecific: [][2]string{{"gslb/strategy", "weighted"}, {"gslb/weight", "eu=1"}}},
		EP("txt.example.org", "TXT", 0, `"quoted whole"`, `back\slash`, "tab\there", "ünïcode", "yes", "1e3", "- dash", "#hash"),
		EP("example.org", "CAA", 0, `0 issue "letsencrypt.org"`),
	}
	labels := map[string]string{"k8gb.io/dnstype": "local", "b": "true"}
	text := DNSEndpoint("team-a", "app", labels, eps...)
	js, err := yaml.YAMLToJSON([]byte(text))
	if err != nil {
		t.Fatalf("%v\n%s", err, text)
	}
	var got, want any
	if err := json.Unmarshal(js, &got); err != nil {
		t.Fatal(err)
	}
	wjs, _ := json.Marshal(DNSEndpointObject("team-a", "app", labels, eps...))
	json.Unmarshal(wjs, &want)
	if !reflect.DeepEqual(got, want) {
		t.Errorf("YAML reads back as\n%s\nwant\n%s\nYAML:\n%s", js, wjs, text)
	}
	if again := DNSEndpoint("team-a", "app", labels, eps...); again != text {
		t.Error("two renderings of the same object differ")
	}
}

func TestDNSEndpointWithoutEndpoints(t *testing.T) {
	js, err := yaml.YAMLToJSON([]byte(DNSEndpoint("", "empty", nil)))
	if err != nil {
		t.Fatal(err)
	}
	if want := `{"apiVersion":"externaldns.k8s.io/v1alpha1","kind":"DNSEndpoint","metadata":{"name":"empty"},"spec":{"endpoints":[]}}`; string(js) != want {
		t.Errorf("got %s, want %s", js, want)
	}
}

func TestWithinWaitsForTheCondition(t *testing.T) {
	n := 0
	if _, ok := Within(time.Second, func() bool { n++; return n == 3 }); !ok || n != 3 {
		t.Errorf("condition true at the 3rd look: ok %v after %d looks", ok, n)
	}
	if note, ok := Within(50*time.Millisecond, func() error { return errors.New("not yet") }); ok || note != "not yet" {
		t.Errorf("a check that keeps failing: got ok %v, note %q", ok, note)
	}
	start := time.Now()
	note, ok := Within(100*time.Millisecond, func() (bool, string) { return false, "still no" })
	if ok || note != "still no" {
		t.Errorf("never true: got ok %v, note %q", ok, note)
	}
	if d := time.Since(start); d < 100*time.Millisecond || !Race && d > time.Second {
		t.Errorf("a 100ms wait took %v", d)
	}
}
