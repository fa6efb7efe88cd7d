package testkit

import (
	"os"
	"path/filepath"
	"testing"
)

// WriteFile writes content to dir/name as a watched file should change: into
// a hidden file beside it, then renamed into place (as kubectl cp, editors
// and the kubelet's ConfigMap volumes do), so that a watcher never reads it
// half-written. It fails the test on error.
func WriteFile(t testing.TB, dir, name, content string) {
	t.Helper()
	if err := WriteFileAtomic(dir, name, content); err != nil {
		t.Fatal(err)
	}
}

// WriteFileAtomic is WriteFile for a goroutine other than the test's, which
// must not call t.Fatal: it returns the error instead.
func WriteFileAtomic(dir, name, content string) error {
	tmp := filepath.Join(dir, "."+name+".tmp")
	if err := os.WriteFile(tmp, []byte(content), 0o644); err != nil {
		return err
	}
	return os.Rename(tmp, filepath.Join(dir, name))
}
