package dirfeed

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/fleetdns/fleetdns/internal/testkit"
	"github.com/fleetdns/fleetdns/plugin/k8scrd/derive"
	"github.com/fleetdns/fleetdns/plugin/k8scrd/object"
)

func TestParseErrorNamesFileAndLine(t *testing.T) {
	raw := testkit.DNSEndpoint("ns", "x", nil, testkit.EP("x.example.org", "A", 0, "192.0.2.1")) + "---\n# second\nkind: DNSEndpoint\nspec: {\n  endpoints: [\n"
	cfg := &Config{Options: derive.Options{Zones: []string{"example.org."}}, Resources: []string{object.KindDNSEndpoint}}
	docs, err := ParseManifests("/m/f.yaml", []byte(raw), time.Unix(1700000000, 0), cfg)
	if len(docs) != 1 {
		t.Fatalf("want the first document parsed, got %d", len(docs))
	}
	lines := strings.Count(testkit.DNSEndpoint("ns", "x", nil, testkit.EP("x.example.org", "A", 0, "192.0.2.1")), "\n")
	if err == nil || !strings.HasPrefix(err.Error(), "/m/f.yaml:") {
		t.Fatalf("error %v does not name the file", err)
	}
	// The second document starts after the separator; the error is inside it.
	var line int
	if _, serr := fmt.Sscanf(err.Error(), "/m/f.yaml:%d:", &line); serr != nil || line <= lines+1 {
		t.Errorf("error %q: want a line inside the second document (after line %d)", err, lines+1)
	}
}

// A document of a kind the folder never reads is an error that names the
// file and every kind accepted; the documents beside it are read.
func TestUnknownKindNamesWhatIsAccepted(t *testing.T) {
	cfg := &Config{Options: derive.Options{Zones: []string{"example.org."}}, Resources: []string{object.KindDNSEndpoint}}
	deployment := "apiVersion: apps/v1\nkind: Deployment\nmetadata:\n  name: web\n"
	raw := testkit.DNSEndpoint("ns", "x", nil, testkit.EP("x.example.org", "A", 0, "192.0.2.1")) + "---\n" + deployment
	p, err := ParseFile("/m/app.yaml", []byte(raw), time.Unix(1700000000, 0), cfg)
	if err == nil {
		t.Fatal("a Deployment: want an error")
	}
	for _, want := range []string{"/m/app.yaml:", `kind "Deployment"`, "DNSEndpoint", "Ingress", "Service", "HTTPRoute", "GRPCRoute", "TLSRoute", "EndpointSlice", "IngressClass", "Gateway", "List"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q does not say %q", err, want)
		}
	}
	if len(p.Docs) != 1 {
		t.Errorf("the DNSEndpoint beside it: want it read, got %d documents", len(p.Docs))
	}

}
