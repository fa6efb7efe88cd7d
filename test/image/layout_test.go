package image

import (
	"archive/tar"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"sort"
	"sync"
	"testing"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/mutate"

	"github.com/fleetdns/fleetdns/test/harness"
)

// Values the test gives cmd/fleetdns-image when it builds the image itself.
const (
	testVersion = "0.0.0-imagetest"
	testCommit  = "0123456789abcdef0123456789abcdef01234567"
	testEpoch   = 1700000000
)

var (
	buildOnce sync.Once
	builtDir  string // removed by TestMain
	builtErr  error
)

// layoutDir is the image layout under test: $FLEETDNS_IMAGE, or one built
// once per test process.
func layoutDir(t *testing.T) string {
	t.Helper()
	if d := os.Getenv("FLEETDNS_IMAGE"); d != "" {
		if _, err := os.Stat(filepath.Join(d, "index.json")); err != nil {
			harness.Missing(t, "FLEETDNS_IMAGE=%s: not an image layout (make image writes it): %v", d, err)
		}
		return d
	}
	root := harness.ModuleRoot(t)
	buildOnce.Do(func() {
		builtDir, builtErr = os.MkdirTemp("", "fleetdns-image-")
		if builtErr != nil {
			return
		}
		cache := os.Getenv("FLEETDNS_CACHE")
		if cache == "" {
			cache = os.TempDir()
		}
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Minute)
		defer cancel()
		cmd := exec.CommandContext(ctx, "go", "run", "./cmd/fleetdns-image",
			"-out", filepath.Join(builtDir, "image"),
			"-builddir", filepath.Join(cache, "image-test-build"),
			"-version", testVersion, "-commit", testCommit, "-epoch", fmt.Sprint(testEpoch))
		cmd.Dir = root
		cmd.Env = append(os.Environ(), "CGO_ENABLED=0", "GOTOOLCHAIN=local")
		if o, err := cmd.CombinedOutput(); err != nil {
			builtErr = fmt.Errorf("go run ./cmd/fleetdns-image: %v\n%s", err, o)
		}
	})
	if builtErr != nil {
		t.Fatal(builtErr)
	}
	return filepath.Join(builtDir, "image")
}

// platformImage is one architecture's image in the layout.
type platformImage struct {
	arch   string
	img    v1.Image
	config *v1.ConfigFile
}

// loadIndex opens the layout's one image index (what index.json names) and
// its images by architecture.
func loadIndex(t *testing.T, dir string) (v1.ImageIndex, *v1.Descriptor, map[string]platformImage) {
	t.Helper()
	top, err := layout.ImageIndexFromPath(dir)
	if err != nil {
		t.Fatal(err)
	}
	tm, err := top.IndexManifest()
	if err != nil {
		t.Fatal(err)
	}
	if len(tm.Manifests) != 1 {
		t.Fatalf("index.json lists %d entries, want 1 (the image index)", len(tm.Manifests))
	}
	desc := tm.Manifests[0]
	idx, err := top.ImageIndex(desc.Digest)
	if err != nil {
		t.Fatalf("index.json's entry %s is not an image index: %v", desc.Digest, err)
	}
	im, err := idx.IndexManifest()
	if err != nil {
		t.Fatal(err)
	}
	imgs := map[string]platformImage{}
	for _, m := range im.Manifests {
		if m.Platform == nil {
			t.Fatalf("index entry %s has no platform", m.Digest)
		}
		img, err := idx.Image(m.Digest)
		if err != nil {
			t.Fatal(err)
		}
		cf, err := img.ConfigFile()
		if err != nil {
			t.Fatal(err)
		}
		imgs[m.Platform.Architecture] = platformImage{arch: m.Platform.Architecture, img: img, config: cf}
	}
	return idx, &desc, imgs
}

// file is one entry of an image's flattened filesystem.
type file struct {
	hdr  *tar.Header
	body []byte
}

// files reads an image's flattened filesystem (mutate.Extract) into memory,
// by path without the leading "/" and trailing "/".
func files(t *testing.T, img v1.Image) map[string]file {
	t.Helper()
	rc := mutate.Extract(img)
	defer rc.Close()
	tr := tar.NewReader(rc)
	out := map[string]file{}
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		body, err := io.ReadAll(tr)
		if err != nil {
			t.Fatal(err)
		}
		out[path.Clean(h.Name)] = file{hdr: h, body: body}
	}
	return out
}

// unpack writes an image's filesystem into dir as a container runtime's
// rootfs: modes, owners and times as the image has them (root is needed for
// the owners).
func unpack(t *testing.T, img v1.Image, dir string) {
	t.Helper()
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	fs := files(t, img)
	// Parents before children: tar order from Extract is the layer's, but
	// sort to be independent of it.
	names := make([]string, 0, len(fs))
	for n := range fs {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		f := fs[n]
		p := filepath.Join(dir, filepath.FromSlash(n))
		mode := os.FileMode(f.hdr.Mode).Perm()
		switch f.hdr.Typeflag {
		case tar.TypeDir:
			if err := os.MkdirAll(p, 0o755); err != nil {
				t.Fatal(err)
			}
		case tar.TypeReg:
			if err := os.WriteFile(p, f.body, 0o600); err != nil {
				t.Fatal(err)
			}
		default:
			t.Fatalf("%s: unexpected tar type %q in the image", n, f.hdr.Typeflag)
		}
		if err := os.Lchown(p, f.hdr.Uid, f.hdr.Gid); err != nil {
			t.Fatal(err)
		}
		if f.hdr.Mode&0o1000 != 0 {
			mode |= os.ModeSticky
		}
		if err := os.Chmod(p, mode); err != nil {
			t.Fatal(err)
		}
	}
}
