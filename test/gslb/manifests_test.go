package gslb

import (
	"os"
	"path/filepath"
	"testing"
)

// writeManifest writes (or replaces) one manifest file in a k8scrd
// directory; k8scrd watches the directory and applies it without a reload.
func writeManifest(t testing.TB, dir, file, content string) {
	t.Helper()
	tmp := filepath.Join(dir, "."+file+".tmp")
	if err := os.WriteFile(tmp, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(tmp, filepath.Join(dir, file)); err != nil {
		t.Fatal(err)
	}
}
