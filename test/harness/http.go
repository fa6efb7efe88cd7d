package harness

import (
	"io"
	"net/http"
	"testing"
	"time"
)

// HTTPBody returns the body of a GET of url (a metrics or health page),
// failing the test when the server does not answer within 5 s.
func HTTPBody(t testing.TB, url string) string {
	t.Helper()
	c := http.Client{Timeout: 5 * time.Second}
	resp, err := c.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}
