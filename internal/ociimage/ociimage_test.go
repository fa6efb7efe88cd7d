package ociimage

import (
	"archive/tar"
	"bytes"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-containerregistry/pkg/v1/layout"
)

func testOptions() Options {
	return Options{
		Version: "0.0.0-test", Commit: "0123456789abcdef0123456789abcdef01234567",
		Source: "https://github.com/fleetdns/fleetdns", Created: time.Unix(1700000000, 0).UTC(),
		CACerts: []byte("-----BEGIN CERTIFICATE-----\n"),
	}
}

func TestFilesAreRootOwnedButTheHome(t *testing.T) {
	data, err := Files([]byte("\x7fELF fake"), testOptions())
	if err != nil {
		t.Fatal(err)
	}
	tr := tar.NewReader(bytes.NewReader(data))
	var names []string
	for {
		h, err := tr.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		names = append(names, h.Name)
		if h.Name != "home/nonroot/" && h.Uid != 0 {
			t.Errorf("%s: uid %d, want 0", h.Name, h.Uid)
		}
		if h.Name == "home/nonroot/" && (h.Uid != UID || h.Gid != GID) {
			t.Errorf("home/nonroot/: owner %d:%d, want %d:%d", h.Uid, h.Gid, UID, GID)
		}
		if !h.ModTime.Equal(testOptions().Created) {
			t.Errorf("%s: mtime %v, want %v", h.Name, h.ModTime, testOptions().Created)
		}
	}
	want := "coredns etc/ etc/group etc/nsswitch.conf etc/passwd etc/ssl/ etc/ssl/certs/ etc/ssl/certs/ca-certificates.crt home/ home/nonroot/ tmp/"
	if got := strings.Join(names, " "); got != want {
		t.Errorf("layer entries\n got %s\nwant %s", got, want)
	}
}

// TestIndexDigestDependsOnlyOnInputs: the same inputs give the same digest,
// another created time another one.
func TestIndexDigestDependsOnlyOnInputs(t *testing.T) {
	dir := t.TempDir()
	bin := filepath.Join(dir, "coredns")
	if err := os.WriteFile(bin, []byte("\x7fELF fake"), 0o755); err != nil {
		t.Fatal(err)
	}
	archs := []Arch{{"amd64", bin}, {"arm64", bin}}
	digest := func(o Options) string {
		idx, err := Index(o, archs)
		if err != nil {
			t.Fatal(err)
		}
		d, err := idx.Digest()
		if err != nil {
			t.Fatal(err)
		}
		return d.String()
	}
	a, b := digest(testOptions()), digest(testOptions())
	if a != b {
		t.Errorf("same inputs, digests %s and %s", a, b)
	}
	later := testOptions()
	later.Created = later.Created.Add(time.Second)
	if c := digest(later); c == a {
		t.Errorf("another created time, same digest %s", c)
	}
}

func TestWriteLayoutReplacesAndNamesTheIndex(t *testing.T) {
	dir := t.TempDir()
	bin := filepath.Join(dir, "coredns")
	if err := os.WriteFile(bin, []byte("\x7fELF fake"), 0o755); err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(dir, "image")
	if err := os.MkdirAll(filepath.Join(out, "stale"), 0o755); err != nil {
		t.Fatal(err)
	}
	idx, err := Index(testOptions(), []Arch{{"amd64", bin}})
	if err != nil {
		t.Fatal(err)
	}
	if err := WriteLayout(out, idx, "0.0.0-test"); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(out, "stale")); !os.IsNotExist(err) {
		t.Errorf("the old layout's content survived: %v", err)
	}
	top, err := layout.ImageIndexFromPath(out)
	if err != nil {
		t.Fatal(err)
	}
	m, err := top.IndexManifest()
	if err != nil {
		t.Fatal(err)
	}
	want, _ := idx.Digest()
	if len(m.Manifests) != 1 || m.Manifests[0].Digest != want || m.Manifests[0].Annotations[refName] != "0.0.0-test" {
		t.Errorf("index.json = %+v, want the index %s named 0.0.0-test", m.Manifests, want)
	}
}
