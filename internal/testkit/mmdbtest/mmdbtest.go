// Package mmdbtest writes small MaxMind databases for the geo tests of gslb
// (its unit tests and test/gslb), so that no test needs a real GeoIP
// database: each network carries continent.code, the field the tests map
// to geo tags with `geo map`.
package mmdbtest

import (
	"bytes"
	"net"
	"os"
	"path/filepath"
	"testing"

	"github.com/maxmind/mmdbwriter"
	"github.com/maxmind/mmdbwriter/mmdbtype"
)

// Network is one network of the database and its continent code.
type Network struct {
	CIDR      string
	Continent string
}

// Continents returns a database holding networks in order: a later, more
// specific network splits an earlier one around it (mmdbwriter
// deaggregates), as in real databases. Reserved networks (10/8, 2001:db8::/32)
// are allowed.
func Continents(t testing.TB, networks ...Network) []byte {
	t.Helper()
	tree, err := mmdbwriter.New(mmdbwriter.Options{DatabaseType: "GeoIP2-City", IncludeReservedNetworks: true, RecordSize: 24})
	if err != nil {
		t.Fatal(err)
	}
	for _, n := range networks {
		_, ipn, err := net.ParseCIDR(n.CIDR)
		if err != nil {
			t.Fatal(err)
		}
		if err := tree.Insert(ipn, mmdbtype.Map{"continent": mmdbtype.Map{"code": mmdbtype.String(n.Continent)}}); err != nil {
			t.Fatal(err)
		}
	}
	var b bytes.Buffer
	if _, err := tree.WriteTo(&b); err != nil {
		t.Fatal(err)
	}
	return b.Bytes()
}

// ContinentsFile writes Continents(networks) to a file in t.TempDir() and
// returns its path.
func ContinentsFile(t testing.TB, networks ...Network) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "geo.mmdb")
	if err := os.WriteFile(path, Continents(t, networks...), 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}
