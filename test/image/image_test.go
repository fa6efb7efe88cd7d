package image

import (
	"bytes"
	"crypto/x509"
	"debug/elf"
	"os/exec"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/fleetdns/fleetdns/internal/ociimage"
	"github.com/fleetdns/fleetdns/test/harness"
)

// TestIndexListsAmd64AndArm64 checks what a platform engineer's runtime
// reads before it starts anything: the index's two platforms, and each
// image's config (numeric user, entrypoint, ports, labels) and files (the
// right ELF machine, static, no shell, the nonroot user, CA certificates, no
// file capability).
func TestIndexListsAmd64AndArm64(t *testing.T) {
	dir := layoutDir(t)
	_, desc, imgs := loadIndex(t, dir)
	var archs []string
	for a := range imgs {
		archs = append(archs, a)
	}
	sort.Strings(archs)
	if strings.Join(archs, ",") != "amd64,arm64" {
		t.Fatalf("index platforms = %v, want amd64 and arm64", archs)
	}
	ref := desc.Annotations["org.opencontainers.image.ref.name"]
	machines := map[string]elf.Machine{"amd64": elf.EM_X86_64, "arm64": elf.EM_AARCH64}

	for _, arch := range archs {
		t.Run(arch, func(t *testing.T) {
			pi := imgs[arch]
			cf := pi.config
			if cf.OS != "linux" || cf.Architecture != arch {
				t.Errorf("config platform = %s/%s, want linux/%s", cf.OS, cf.Architecture, arch)
			}
			c := cf.Config
			if c.User != "65532:65532" {
				t.Errorf("config User = %q, want 65532:65532 (numeric, for runAsNonRoot)", c.User)
			}
			if strings.Join(c.Entrypoint, " ") != "/coredns" || len(c.Cmd) != 0 {
				t.Errorf("config Entrypoint %q Cmd %q, want [/coredns] and no Cmd", c.Entrypoint, c.Cmd)
			}
			var ports []string
			for p := range c.ExposedPorts {
				ports = append(ports, p)
			}
			sort.Strings(ports)
			if strings.Join(ports, " ") != "53/tcp 53/udp 9153/tcp" {
				t.Errorf("config ExposedPorts = %v, want 53/tcp 53/udp 9153/tcp", ports)
			}
			rev, ver, src := c.Labels[ociimage.LabelRevision], c.Labels[ociimage.LabelVersion], c.Labels[ociimage.LabelSource]
			if !regexp.MustCompile(`^[0-9a-f]{40}$`).MatchString(rev) {
				t.Errorf("label %s = %q, want a full commit", ociimage.LabelRevision, rev)
			}
			if ver == "" || ver != ref {
				t.Errorf("label %s = %q, index.json's ref.name %q: want the same, non-empty", ociimage.LabelVersion, ver, ref)
			}
			if !strings.HasPrefix(src, "https://") {
				t.Errorf("label %s = %q, want the repository's URL", ociimage.LabelSource, src)
			}
			// SOURCE_DATE_EPOCH: the commit's time when built from this tree.
			if ct := commitTime(t, rev); !ct.IsZero() && !cf.Created.Time.Equal(ct) {
				t.Errorf("config created %v, want the commit's time %v", cf.Created.Time, ct)
			}

			fs := files(t, pi.img)
			var names []string
			for n := range fs {
				names = append(names, n)
			}
			sort.Strings(names)
			want := "coredns etc etc/group etc/nsswitch.conf etc/passwd etc/ssl etc/ssl/certs etc/ssl/certs/ca-certificates.crt home home/nonroot tmp"
			if got := strings.Join(names, " "); got != want {
				t.Errorf("image files:\n got %s\nwant %s (no shell, nothing else)", got, want)
			}
			for n, f := range fs {
				if !f.hdr.ModTime.Equal(cf.Created.Time) {
					t.Errorf("%s: mtime %v, want the config's created %v", n, f.hdr.ModTime, cf.Created.Time)
				}
				for k := range f.hdr.PAXRecords {
					if strings.HasPrefix(k, "SCHILY.xattr.") {
						t.Errorf("%s carries %s: a file capability fails to exec under drop ALL", n, k)
					}
				}
				if owner := f.hdr.Uid; owner != 0 && n != "home/nonroot" {
					t.Errorf("%s owned by uid %d, want root (only the home is nonroot's)", n, owner)
				}
			}
			bin := fs["coredns"]
			if bin.hdr == nil {
				t.Fatal("no /coredns")
			}
			if bin.hdr.Mode&0o111 == 0 || bin.hdr.Mode&0o6000 != 0 {
				t.Errorf("/coredns mode %o, want executable, neither setuid nor setgid", bin.hdr.Mode)
			}
			ef, err := elf.NewFile(bytes.NewReader(bin.body))
			if err != nil {
				t.Fatalf("/coredns: %v", err)
			}
			if ef.Machine != machines[arch] {
				t.Errorf("/coredns ELF machine %v, want %v", ef.Machine, machines[arch])
			}
			for _, p := range ef.Progs {
				if p.Type == elf.PT_INTERP || p.Type == elf.PT_DYNAMIC {
					t.Errorf("/coredns has %v: not static", p.Type)
				}
			}
			if !regexp.MustCompile(`(?m)^nonroot:x:65532:65532:`).Match(fs["etc/passwd"].body) {
				t.Errorf("/etc/passwd has no nonroot 65532:\n%s", fs["etc/passwd"].body)
			}
			if !regexp.MustCompile(`(?m)^nonroot:x:65532:`).Match(fs["etc/group"].body) {
				t.Errorf("/etc/group has no nonroot 65532:\n%s", fs["etc/group"].body)
			}
			pool := x509.NewCertPool()
			if !pool.AppendCertsFromPEM(fs["etc/ssl/certs/ca-certificates.crt"].body) {
				t.Errorf("/etc/ssl/certs/ca-certificates.crt holds no certificate")
			}
		})
	}
}

// commitTime is rev's committer time when rev is in this repository (the
// image was built from it), else zero.
func commitTime(t *testing.T, rev string) time.Time {
	cmd := exec.Command("git", "log", "-1", "--format=%ct", rev)
	cmd.Dir = harness.ModuleRoot(t)
	out, err := cmd.Output()
	if err != nil {
		return time.Time{}
	}
	secs, err := strconv.ParseInt(strings.TrimSpace(string(out)), 10, 64)
	if err != nil {
		return time.Time{}
	}
	return time.Unix(secs, 0)
}

// TestIndexIsAFunctionOfItsInputs rebuilds the index in this process from
// what the image holds (each architecture's binary, the CA bundle, the
// labels, the created time) and wants the same digest: no wall clock, host
// user or file order leaks into it, so the same commit gives the same image.
func TestIndexIsAFunctionOfItsInputs(t *testing.T) {
	dir := layoutDir(t)
	idx, _, imgs := loadIndex(t, dir)
	want, err := idx.Digest()
	if err != nil {
		t.Fatal(err)
	}
	tmp := t.TempDir()
	var archs []ociimage.Arch
	var o ociimage.Options
	// The index's order of architectures is the build's: keep it.
	im, err := idx.IndexManifest()
	if err != nil {
		t.Fatal(err)
	}
	for _, m := range im.Manifests {
		pi := imgs[m.Platform.Architecture]
		fs := files(t, pi.img)
		bin := tmp + "/coredns-" + pi.arch
		writeFile(t, bin, fs["coredns"].body)
		archs = append(archs, ociimage.Arch{Arch: pi.arch, Binary: bin})
		l := pi.config.Config.Labels
		o = ociimage.Options{
			Version: l[ociimage.LabelVersion],
			Commit:  l[ociimage.LabelRevision],
			Source:  l[ociimage.LabelSource],
			Created: pi.config.Created.Time,
			CACerts: fs["etc/ssl/certs/ca-certificates.crt"].body,
		}
	}
	again, err := ociimage.Index(o, archs)
	if err != nil {
		t.Fatal(err)
	}
	got, err := again.Digest()
	if err != nil {
		t.Fatal(err)
	}
	if got != want {
		t.Errorf("index rebuilt from the image's own inputs has digest %s, the layout's is %s", got, want)
	}
}
