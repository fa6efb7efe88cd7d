package harness

import (
	"fmt"
	"math/rand/v2"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"syscall"
	"testing"
)

// Loopback addresses handed out by NewIP come from 127.100.0.0-127.254.255.255;
// 127.0.0.0/16 is left to humans (make run uses 127.0.0.1:1053) and to tests
// that pick fixed addresses.
//
// Test packages run as separate processes in parallel, so an address is
// reserved with a lock file (O_EXCL) in lockDir naming the owning pid; a lock
// whose process is gone is taken over. On top of that the address must accept
// a UDP and a TCP bind on port 53 before it is handed out.
var lockDir = filepath.Join(os.TempDir(), "fleetdns-loopback")

// NewIP returns a loopback IPv4 address that no other test (in this process or
// another) is using, as a string such as "127.123.4.5". Servers bind port 53
// on it (root) or any port from FreePort. The reservation ends with the test.
func NewIP(t testing.TB) string {
	t.Helper()
	if err := os.MkdirAll(lockDir, 0o777); err != nil {
		t.Fatalf("loopback lock dir: %v", err)
	}
	for range 1000 {
		ip := randomIP()
		if !reserve(ip) {
			continue
		}
		if !bindable(ip, 53) {
			os.Remove(filepath.Join(lockDir, ip))
			continue
		}
		t.Cleanup(func() { os.Remove(filepath.Join(lockDir, ip)) })
		return ip
	}
	t.Fatal("no free loopback address after 1000 tries")
	return ""
}

// NewAddr returns "IP:53" on a fresh loopback address from NewIP.
func NewAddr(t testing.TB) string {
	t.Helper()
	return net.JoinHostPort(NewIP(t), "53")
}

func reserve(ip string) bool {
	p := filepath.Join(lockDir, ip)
	f, err := os.OpenFile(p, os.O_CREATE|os.O_EXCL|os.O_WRONLY, 0o666)
	if err == nil {
		fmt.Fprintf(f, "%d\n", os.Getpid())
		f.Close()
		return true
	}
	// Stale lock: the process that took it is gone.
	b, rerr := os.ReadFile(p)
	if rerr != nil {
		return false
	}
	pid, perr := strconv.Atoi(string(trimNL(b)))
	if perr != nil || pid <= 0 {
		return false
	}
	if syscall.Kill(pid, 0) == nil || pid == os.Getpid() {
		return false
	}
	os.Remove(p)
	f, err = os.OpenFile(p, os.O_CREATE|os.O_EXCL|os.O_WRONLY, 0o666)
	if err != nil {
		return false
	}
	fmt.Fprintf(f, "%d\n", os.Getpid())
	f.Close()
	return true
}

func trimNL(b []byte) []byte {
	for len(b) > 0 && (b[len(b)-1] == '\n' || b[len(b)-1] == '\r' || b[len(b)-1] == ' ') {
		b = b[:len(b)-1]
	}
	return b
}

func bindable(ip string, port int) bool {
	addr := net.JoinHostPort(ip, strconv.Itoa(port))
	u, err := net.ListenPacket("udp", addr)
	if err != nil {
		return false
	}
	defer u.Close()
	l, err := net.Listen("tcp", addr)
	if err != nil {
		return false
	}
	l.Close()
	return true
}

// FreePort returns a TCP port on ip that is free at the time of the call and
// also free for UDP (the kernel picks it; on an address from NewIP nobody else
// binds, so it stays free).
func FreePort(t testing.TB, ip string) int {
	t.Helper()
	for range 100 {
		l, err := net.Listen("tcp", net.JoinHostPort(ip, "0"))
		if err != nil {
			t.Fatalf("free port on %s: %v", ip, err)
		}
		port := l.Addr().(*net.TCPAddr).Port
		l.Close()
		if bindable(ip, port) {
			return port
		}
	}
	t.Fatalf("no free port on %s", ip)
	return 0
}

// HostPort returns "ip:port" with a free port on ip.
func HostPort(t testing.TB, ip string) string {
	t.Helper()
	return net.JoinHostPort(ip, strconv.Itoa(FreePort(t, ip)))
}

func randomIP() string {
	return fmt.Sprintf("127.%d.%d.%d", 100+rand.IntN(155), rand.IntN(256), 1+rand.IntN(254))
}
