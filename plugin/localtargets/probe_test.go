package localtargets

import (
	"context"
	"crypto/tls"
	"fmt"
	"net/http"
	"net/http/httptest"
	"runtime"
	"sync"
	"testing"
	"time"
)

// TestManyHostValuesShareOneClient (issue 24, finding 6): HTTPS checks
// with 500 distinct Host values each send their own server name and
// Host, and leave no client, transport or connection behind: the heap
// after them is within 1 MiB of the heap before. One transport per Host
// value, as before, kept about 1.7 KiB each for ever: a tenant who rotates
// 1,000 Host values 30 times leaves 50 MiB behind (see test/localtargets
// for the process's RSS).
func TestManyHostValuesShareOneClient(t *testing.T) {
	var mu sync.Mutex
	mismatch := 0
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		defer mu.Unlock()
		if r.TLS.ServerName != r.Host {
			mismatch++
		}
	}))
	l, port := listener(t)
	srv.Listener = l
	srv.TLS = &tls.Config{}
	srv.StartTLS()
	defer srv.Close()

	hc := httpHealthCheck("https", port, "/", "")
	c := newChecker(hc, nil, defaultPrefix, nil)
	check := func(i int) {
		p := spec(hc, "127.0.0.1")
		p.host = fmt.Sprintf("h%d.example.org", i)
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer cancel()
		if err := c.check(ctx, p); err != nil {
			t.Fatalf("check %d: %v", i, err)
		}
	}
	check(-1) // the client's own first allocations
	heap := func() uint64 {
		runtime.GC()
		var m runtime.MemStats
		runtime.ReadMemStats(&m)
		return m.HeapInuse
	}
	before := heap()
	for i := range 500 {
		check(i)
	}
	srv.CloseClientConnections()
	grown := int64(heap()) - int64(before)
	t.Logf("heap grew by %d KiB", grown>>10)
	if grown > 1<<20 {
		t.Errorf("heap grew by %d KiB after 500 Host values, want at most 1 MiB", grown>>10)
	}
	mu.Lock()
	defer mu.Unlock()
	if mismatch != 0 {
		t.Errorf("%d checks whose TLS server name was not their Host", mismatch)
	}
}
