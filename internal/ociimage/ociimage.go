// Package ociimage assembles fleetdns's container image without a container
// daemon or a registry: one layer holding the static coredns binary, CA
// certificates and the passwd/group entries of the nonroot user (uid 65532,
// as distroless has it), and nothing else (no shell, no libc). Each
// architecture is one image; an image index lists them, written as an OCI
// image layout directory (github.com/google/go-containerregistry).
//
// Every timestamp is the given Created time (SOURCE_DATE_EPOCH: the commit's
// time), so the same inputs give the same digests.
package ociimage

import (
	"archive/tar"
	"bytes"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
	"github.com/google/go-containerregistry/pkg/v1/types"
)

// The image's fixed shape: what the manifests and tests rely on.
const (
	// UID and GID are distroless's nonroot; numeric in the config so that a
	// Pod with only runAsNonRoot: true can verify it without a passwd lookup.
	UID = 65532
	GID = 65532
	// Entrypoint is where the binary lives, as in CoreDNS's image.
	Entrypoint = "/coredns"
	// CACertsPath is where Go's crypto/x509 looks first on Linux.
	CACertsPath = "/etc/ssl/certs/ca-certificates.crt"
)

// OCI annotation keys used as labels (image-spec annotations.md).
const (
	LabelRevision = "org.opencontainers.image.revision"
	LabelVersion  = "org.opencontainers.image.version"
	LabelSource   = "org.opencontainers.image.source"
	refName       = "org.opencontainers.image.ref.name"
)

// Options is what goes into every architecture's image.
type Options struct {
	Version string    // fleetdns version (internal/version.Version)
	Commit  string    // fleetdns commit (internal/version.Commit, coremain.GitCommit)
	Source  string    // repository URL for org.opencontainers.image.source
	Created time.Time // every file's mtime and the config's created time
	CACerts []byte    // PEM bundle written to CACertsPath
}

// Arch is one architecture's binary.
type Arch struct {
	Arch   string // GOARCH: amd64, arm64
	Binary string // path of the static coredns built for it
}

// LDFlags are the linker flags of `make build` and the image: stripped, and
// the fleetdns version and commit stamped into internal/version and into
// CoreDNS's own GitCommit (its -version line and coredns_build_info's
// revision).
func LDFlags(version, commit string) string {
	return fmt.Sprintf("-s -w -X github.com/fleetdns/fleetdns/internal/version.Version=%s"+
		" -X github.com/fleetdns/fleetdns/internal/version.Commit=%s"+
		" -X github.com/coredns/coredns/coremain.GitCommit=%s", version, commit, commit)
}

// Files returns the image's one layer as an uncompressed tar: directories
// first, root-owned except the nonroot user's home, every mtime o.Created.
func Files(binary []byte, o Options) ([]byte, error) {
	type entry struct {
		name string
		mode int64
		uid  int
		body []byte
		dir  bool
	}
	passwd := "root:x:0:0:root:/root:/sbin/nologin\n" +
		"nobody:x:65534:65534:nobody:/nonexistent:/sbin/nologin\n" +
		fmt.Sprintf("nonroot:x:%d:%d:nonroot:/home/nonroot:/sbin/nologin\n", UID, GID)
	group := "root:x:0:\nnobody:x:65534:\n" + fmt.Sprintf("nonroot:x:%d:\n", GID)
	entries := []entry{
		{name: "coredns", mode: 0o755, body: binary},
		{name: "etc/", mode: 0o755, dir: true},
		{name: "etc/group", mode: 0o644, body: []byte(group)},
		// Go's resolver reads it: /etc/hosts before DNS, as glibc does.
		{name: "etc/nsswitch.conf", mode: 0o644, body: []byte("hosts: files dns\n")},
		{name: "etc/passwd", mode: 0o644, body: []byte(passwd)},
		{name: "etc/ssl/", mode: 0o755, dir: true},
		{name: "etc/ssl/certs/", mode: 0o755, dir: true},
		{name: CACertsPath[1:], mode: 0o644, body: o.CACerts},
		{name: "home/", mode: 0o755, dir: true},
		{name: "home/nonroot/", mode: 0o700, uid: UID, dir: true},
		{name: "tmp/", mode: 0o1777, dir: true},
	}
	sort.Slice(entries, func(i, j int) bool { return entries[i].name < entries[j].name })

	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	for _, e := range entries {
		h := &tar.Header{
			Name:    e.name,
			Mode:    e.mode,
			Uid:     e.uid,
			Gid:     e.uid, // 0 or 65532: the user's own group
			ModTime: o.Created,
			Format:  tar.FormatPAX,
		}
		if e.dir {
			h.Typeflag = tar.TypeDir
		} else {
			h.Typeflag = tar.TypeReg
			h.Size = int64(len(e.body))
		}
		if err := tw.WriteHeader(h); err != nil {
			return nil, err
		}
		if _, err := tw.Write(e.body); err != nil {
			return nil, err
		}
	}
	if err := tw.Close(); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

// Image is one architecture's image: the layer of Files and its config.
func Image(arch string, binary []byte, o Options) (v1.Image, error) {
	files, err := Files(binary, o)
	if err != nil {
		return nil, err
	}
	layer, err := tarball.LayerFromOpener(func() (io.ReadCloser, error) {
		return io.NopCloser(bytes.NewReader(files)), nil
	}, tarball.WithMediaType(types.OCILayer))
	if err != nil {
		return nil, err
	}
	created := v1.Time{Time: o.Created.UTC()}
	base := mutate.ConfigMediaType(mutate.MediaType(empty.Image, types.OCIManifestSchema1), types.OCIConfigJSON)
	img, err := mutate.Append(base, mutate.Addendum{
		Layer:     layer,
		MediaType: types.OCILayer,
		History: v1.History{
			Created:   created,
			CreatedBy: "fleetdns-image: /coredns, CA certificates, passwd and group of nonroot",
			Comment:   "fleetdns " + o.Version,
		},
	})
	if err != nil {
		return nil, err
	}
	cf, err := img.ConfigFile()
	if err != nil {
		return nil, err
	}
	cf = cf.DeepCopy()
	cf.Architecture = arch
	cf.OS = "linux"
	cf.Created = created
	cf.Config = v1.Config{
		User:       fmt.Sprintf("%d:%d", UID, GID),
		Entrypoint: []string{Entrypoint},
		WorkingDir: "/",
		Env:        []string{"SSL_CERT_FILE=" + CACertsPath},
		ExposedPorts: map[string]struct{}{
			"53/tcp": {}, "53/udp": {}, "9153/tcp": {},
		},
		Labels: map[string]string{
			LabelRevision: o.Commit,
			LabelVersion:  o.Version,
			LabelSource:   o.Source,
		},
	}
	return mutate.ConfigFile(img, cf)
}

// Index builds one image per architecture and lists them in an OCI image
// index with their platforms.
func Index(o Options, archs []Arch) (v1.ImageIndex, error) {
	idx := mutate.IndexMediaType(empty.Index, types.OCIImageIndex)
	var adds []mutate.IndexAddendum
	for _, a := range archs {
		bin, err := os.ReadFile(a.Binary)
		if err != nil {
			return nil, err
		}
		img, err := Image(a.Arch, bin, o)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", a.Arch, err)
		}
		adds = append(adds, mutate.IndexAddendum{
			Add: img,
			Descriptor: v1.Descriptor{
				MediaType: types.OCIManifestSchema1,
				Platform:  &v1.Platform{OS: "linux", Architecture: a.Arch},
			},
		})
	}
	return mutate.AppendManifests(idx, adds...), nil
}

// WriteLayout writes idx as the OCI image layout dir, replacing what was
// there (a new folder beside it, then renamed), with index.json naming it
// by ref (org.opencontainers.image.ref.name, e.g. the version).
func WriteLayout(dir string, idx v1.ImageIndex, ref string) error {
	parent := filepath.Dir(dir)
	if err := os.MkdirAll(parent, 0o755); err != nil {
		return err
	}
	tmp, err := os.MkdirTemp(parent, "."+filepath.Base(dir)+"-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(tmp)
	p, err := layout.Write(tmp, empty.Index)
	if err != nil {
		return err
	}
	if err := p.AppendIndex(idx, layout.WithAnnotations(map[string]string{refName: ref})); err != nil {
		return err
	}
	// The library writes blobs 0600 or 0755 by how it wrote them: make the
	// layout world-readable, nothing executable (a copy or a push reads it).
	err = filepath.WalkDir(tmp, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			return os.Chmod(p, 0o755)
		}
		return os.Chmod(p, 0o644)
	})
	if err != nil {
		return err
	}
	if err := os.RemoveAll(dir); err != nil {
		return err
	}
	return os.Rename(tmp, dir)
}
