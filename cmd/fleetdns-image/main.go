// Command fleetdns-image builds fleetdns's container image as an OCI image
// layout directory, without a container daemon or a registry: it
// cross-compiles ./cmd/coredns for each architecture (CGO_ENABLED=0,
// -trimpath, internal/ociimage.LDFlags) and assembles the image index with
// internal/ociimage. `make image` runs it:
//
//	go run ./cmd/fleetdns-image -out bin/image -version 0.0.0-06d2de5 \
//	    -commit 06d2de5... -epoch 1764590000
//
// The binaries stay in -builddir, so that an unchanged tree relinks nothing
// (go build finds them up to date).
package main

import (
	"flag"
	"fmt"
	"log"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/fleetdns/fleetdns/internal/ociimage"
)

func main() {
	log.SetFlags(0)
	log.SetPrefix("fleetdns-image: ")
	var (
		out      = flag.String("out", "bin/image", "OCI image layout directory to write (replaced)")
		buildDir = flag.String("builddir", "bin/image-build", "where the per-architecture binaries are kept between runs")
		archs    = flag.String("arch", "amd64,arm64", "GOARCH list, comma-separated")
		version  = flag.String("version", "", "fleetdns version (required)")
		commit   = flag.String("commit", "", "fleetdns commit (required)")
		source   = flag.String("source", "https://github.com/fleetdns/fleetdns", "org.opencontainers.image.source")
		epoch    = flag.String("epoch", os.Getenv("SOURCE_DATE_EPOCH"), "every timestamp, in seconds since 1970 (default $SOURCE_DATE_EPOCH, else 0)")
		cacerts  = flag.String("cacerts", "/etc/ssl/certs/ca-certificates.crt", "PEM bundle to ship as "+ociimage.CACertsPath)
	)
	flag.Parse()
	if *version == "" || *commit == "" {
		log.Fatal("-version and -commit are required (make image passes them from git)")
	}
	secs := int64(0)
	if *epoch != "" {
		var err error
		if secs, err = strconv.ParseInt(*epoch, 10, 64); err != nil {
			log.Fatalf("-epoch %q: %v", *epoch, err)
		}
	}
	ca, err := os.ReadFile(*cacerts)
	if err != nil {
		log.Fatalf("CA certificates: %v (Debian's ca-certificates package provides them)", err)
	}
	o := ociimage.Options{
		Version: *version,
		Commit:  *commit,
		Source:  *source,
		Created: time.Unix(secs, 0).UTC(),
		CACerts: ca,
	}

	var built []ociimage.Arch
	for _, arch := range strings.Split(*archs, ",") {
		bin := filepath.Join(*buildDir, "linux_"+arch, "coredns")
		if err := goBuild(arch, bin, ociimage.LDFlags(o.Version, o.Commit)); err != nil {
			log.Fatal(err)
		}
		built = append(built, ociimage.Arch{Arch: arch, Binary: bin})
	}
	idx, err := ociimage.Index(o, built)
	if err != nil {
		log.Fatal(err)
	}
	if err := ociimage.WriteLayout(*out, idx, o.Version); err != nil {
		log.Fatal(err)
	}
	d, err := idx.Digest()
	if err != nil {
		log.Fatal(err)
	}
	fmt.Printf("%s %s (%s)\n", *out, d, *archs)
}

// goBuild cross-compiles ./cmd/coredns, static, for linux/arch.
func goBuild(arch, out, ldflags string) error {
	if err := os.MkdirAll(filepath.Dir(out), 0o755); err != nil {
		return err
	}
	gobin := filepath.Join(os.Getenv("GOROOT"), "bin", "go")
	if _, err := os.Stat(gobin); err != nil {
		gobin = "go"
	}
	cmd := exec.Command(gobin, "build", "-trimpath", "-ldflags", ldflags, "-o", out, "./cmd/coredns")
	cmd.Env = append(os.Environ(), "GOOS=linux", "GOARCH="+arch, "CGO_ENABLED=0", "GOTOOLCHAIN=local")
	cmd.Stdout, cmd.Stderr = os.Stderr, os.Stderr
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("go build for linux/%s: %w", arch, err)
	}
	return nil
}
