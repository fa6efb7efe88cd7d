package deploy

import (
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/fleetdns/fleetdns/test/harness"
)

// podNet stands in for a cluster's pod network: a network namespace that the
// test creates, holding the addresses that its EndpointSlices list. The API
// server refuses loopback addresses in EndpointSlices, and a test may name
// only addresses of its own (198.18.0.0/15, in a namespace it made). No
// traffic goes there: nothing in these tests connects to a pod.
type podNet struct {
	t      *testing.T
	name   string
	prefix string // "198.19.N."
	mu     sync.Mutex
	next   int
}

// newPodNet creates a network namespace (the pods' addresses go on its
// loopback interface: no device type beyond what every kernel has) and reserves
// a /24 of 198.19.0.0/16 for it (a lock file, as harness.NewIP does for
// loopback addresses, so parallel test processes never share one). Both go
// with the test.
func newPodNet(t *testing.T) *podNet {
	t.Helper()
	if os.Geteuid() != 0 {
		harness.Missing(t, "root, to create a network namespace for the pods' addresses")
	}
	ipTool, err := exec.LookPath("ip")
	if err != nil {
		harness.Missing(t, "ip (iproute2), to create a network namespace for the pods' addresses")
	}
	dir := filepath.Join(os.TempDir(), "fleetdns-podnet")
	if err := os.MkdirAll(dir, 0o777); err != nil {
		t.Fatal(err)
	}
	for range 256 {
		n := rand.IntN(256)
		lock := filepath.Join(dir, strconv.Itoa(n))
		if !takeLock(lock) {
			continue
		}
		name := fmt.Sprintf("fleetdns-pods-%d", n)
		run := func(args ...string) error {
			out, err := exec.Command(ipTool, args...).CombinedOutput()
			if err != nil {
				return fmt.Errorf("ip %s: %v: %s", strings.Join(args, " "), err, out)
			}
			return nil
		}
		_ = run("netns", "del", name) // a namespace left by a killed run
		if err := run("netns", "add", name); err != nil {
			os.Remove(lock)
			t.Fatal(err)
		}
		t.Cleanup(func() {
			if err := run("netns", "del", name); err != nil {
				t.Log(err)
			}
			os.Remove(lock)
		})
		if err := run("-n", name, "link", "set", "lo", "up"); err != nil {
			t.Fatal(err)
		}
		return &podNet{t: t, name: name, prefix: fmt.Sprintf("198.19.%d.", n), next: 10}
	}
	t.Fatal("no free /24 in 198.19.0.0/16 for a pod network after 256 tries")
	return nil
}

// addr adds one more address to the namespace (a pod's) and returns it.
func (p *podNet) addr() string {
	p.t.Helper()
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.next > 250 {
		p.t.Fatal("pod network full")
	}
	a := p.prefix + strconv.Itoa(p.next)
	p.next++
	if out, err := exec.Command("ip", "-n", p.name, "addr", "add", a+"/32", "dev", "lo").CombinedOutput(); err != nil {
		p.t.Fatalf("ip -n %s addr add %s: %v: %s", p.name, a, err, out)
	}
	return a
}

// takeLock creates path exclusively, naming this process; a lock whose
// process is gone is taken over.
func takeLock(path string) bool {
	for range 2 {
		f, err := os.OpenFile(path, os.O_CREATE|os.O_EXCL|os.O_WRONLY, 0o666)
		if err == nil {
			fmt.Fprintf(f, "%d\n", os.Getpid())
			f.Close()
			return true
		}
		b, err := os.ReadFile(path)
		if err != nil {
			return false
		}
		pid, err := strconv.Atoi(strings.TrimSpace(string(b)))
		if err == nil && pid > 0 {
			if _, err := os.Stat("/proc/" + strconv.Itoa(pid)); err == nil {
				return false
			}
		}
		os.Remove(path)
	}
	return false
}
