package harness

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/fleetdns/fleetdns/internal/testkit"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
)

// Kube is a real Kubernetes API server (kube-apiserver + etcd) on a loopback
// address of its own, with RBAC authorization, ServiceAccount tokens, an
// admin identity (a client certificate in system:masters) and the
// DNSEndpoint CRD installed.
//
// One per test package: call harness.Main from TestMain and SharedKube from
// the tests. A test that must not share (it restarts etcd, say, while other
// tests run in parallel) may start its own with StartKube.
type Kube struct {
	Bin        string // folder of kube-apiserver, etcd, kubectl
	Dir        string // certificates, keys, kubeconfigs, etcd data, logs
	IP         string // the loopback address both processes listen on
	URL        string // https://IP:port of the API server
	EtcdURL    string // http://IP:port of etcd
	Kubeconfig string // admin kubeconfig file (system:masters)
	Config     *rest.Config

	Etcd      *Process
	APIServer *Process

	ca         *keyPair
	admin      *keyPair
	etcdArgs   []string
	apiArgs    []string
	log        logger
	releaseIP  func()
	clientOnce sync.Once
	dyn        dynamic.Interface
	cs         kubernetes.Interface
	mapper     *mapper
}

// KubeBin returns the folder holding kube-apiserver, etcd and kubectl:
// $FLEETDNS_K8S_BIN, else the newest cache folder of scripts/test-deps.sh.
// A missing folder or binary goes through Missing.
func KubeBin(t testing.TB) string {
	t.Helper()
	dir, err := kubeBin()
	if err != nil {
		Missing(t, "%v", err)
	}
	return dir
}

func kubeBin() (string, error) {
	dir := os.Getenv("FLEETDNS_K8S_BIN")
	if dir == "" {
		cache := os.Getenv("FLEETDNS_CACHE")
		if cache == "" {
			cache = "/var/cache/fleetdns"
		}
		matches, _ := filepath.Glob(filepath.Join(cache, "k8s-*", "bin"))
		if len(matches) == 0 {
			return "", errors.New("kube-apiserver/etcd: FLEETDNS_K8S_BIN is not set and scripts/test-deps.sh has not built them")
		}
		dir = matches[len(matches)-1]
	}
	for _, b := range []string{"kube-apiserver", "etcd", "kubectl"} {
		if st, err := os.Stat(filepath.Join(dir, b)); err != nil || st.IsDir() {
			return "", fmt.Errorf("%s not in %s (scripts/test-deps.sh builds it)", b, dir)
		}
	}
	return dir, nil
}

var shared struct {
	mainCalled bool
	once       sync.Once
	k          *Kube
	err        error
}

// Main runs the package's tests and then stops the shared API server, if a
// test started one. Use it as
//
//	func TestMain(m *testing.M) { os.Exit(harness.Main(m)) }
func Main(m *testing.M) int {
	shared.mainCalled = true
	code := m.Run()
	if k := shared.k; k != nil {
		if code != 0 {
			k.Etcd.dump(stderrLogger{})
			k.APIServer.dump(stderrLogger{})
		}
		k.stop()
	}
	return code
}

// SharedKube returns the package's API server, starting it (and installing
// the DNSEndpoint CRD) on first use. The package's TestMain must call Main.
func SharedKube(t testing.TB) *Kube {
	t.Helper()
	bin := KubeBin(t)
	if !shared.mainCalled {
		t.Fatal("SharedKube needs TestMain to call harness.Main (it stops the API server)")
	}
	shared.once.Do(func() {
		root, err := moduleRoot()
		if err != nil {
			shared.err = err
			return
		}
		shared.k, shared.err = startKube(stderrLogger{}, bin)
		if shared.err == nil {
			shared.err = shared.k.installCRD(filepath.Join(root, CRDPath))
		}
	})
	if shared.err != nil {
		t.Fatalf("shared API server: %v", shared.err)
	}
	return shared.k
}

// StartKube starts an API server that belongs to this test alone (CRD
// installed), stopped in t.Cleanup; its logs are dumped if the test failed.
func StartKube(t testing.TB) *Kube {
	t.Helper()
	bin := KubeBin(t)
	k, err := startKube(t, bin)
	if err != nil {
		t.Fatalf("API server: %v", err)
	}
	t.Cleanup(func() {
		if t.Failed() {
			k.Etcd.dump(t)
			k.APIServer.dump(t)
		}
		k.stop()
	})
	if err := k.installCRD(filepath.Join(ModuleRoot(t), CRDPath)); err != nil {
		t.Fatal(err)
	}
	return k
}

func startKube(l logger, bin string) (k *Kube, err error) {
	ip, release, err := allocIP()
	if err != nil {
		return nil, err
	}
	dir, err := os.MkdirTemp("", "fleetdns-kube-")
	if err != nil {
		release()
		return nil, err
	}
	k = &Kube{Bin: bin, Dir: dir, IP: ip, log: l, releaseIP: release}
	defer func() {
		if err != nil {
			if k.Etcd != nil {
				l.Logf("%s", tail(k.Etcd.Log(), 8<<10))
			}
			if k.APIServer != nil {
				l.Logf("%s", tail(k.APIServer.Log(), 8<<10))
			}
			k.stop()
		}
	}()
	if err := k.writeCredentials(); err != nil {
		return k, err
	}
	ports, err := freePorts(ip, 3)
	if err != nil {
		return k, err
	}
	clientURL := fmt.Sprintf("http://%s:%d", ip, ports[0])
	peerURL := fmt.Sprintf("http://%s:%d", ip, ports[1])
	k.EtcdURL = clientURL
	k.URL = fmt.Sprintf("https://%s:%d", ip, ports[2])
	k.etcdArgs = []string{
		"--name=fleetdns",
		"--data-dir=" + filepath.Join(dir, "etcd"),
		"--listen-client-urls=" + clientURL,
		"--advertise-client-urls=" + clientURL,
		"--listen-peer-urls=" + peerURL,
		"--initial-advertise-peer-urls=" + peerURL,
		"--initial-cluster=fleetdns=" + peerURL,
		"--unsafe-no-fsync",
		"--log-level=warn",
	}
	k.apiArgs = []string{
		"--etcd-servers=" + clientURL,
		"--bind-address=" + ip,
		"--secure-port=" + strconv.Itoa(ports[2]),
		"--advertise-address=" + ip,
		// With a loopback advertise address the endpoint reconciler fails;
		// nothing here needs the kubernetes Service's endpoints.
		"--endpoint-reconciler-type=none",
		"--cert-dir=" + filepath.Join(dir, "apiserver"),
		"--tls-cert-file=" + filepath.Join(dir, "apiserver.crt"),
		"--tls-private-key-file=" + filepath.Join(dir, "apiserver.key"),
		"--client-ca-file=" + filepath.Join(dir, "ca.crt"),
		"--authorization-mode=RBAC",
		"--service-account-issuer=https://kubernetes.default.svc.cluster.local",
		"--service-account-key-file=" + filepath.Join(dir, "sa.pub"),
		"--service-account-signing-key-file=" + filepath.Join(dir, "sa.key"),
		"--service-cluster-ip-range=10.96.0.0/16",
		"--allow-privileged=true",
		"--profiling=false",
	}
	if k.Etcd, err = newProcess(l, "etcd", filepath.Join(bin, "etcd"), k.etcdArgs, dir); err != nil {
		return k, err
	}
	if err := k.waitEtcd(60 * time.Second); err != nil {
		return k, err
	}
	if k.APIServer, err = newProcess(l, "kube-apiserver", filepath.Join(bin, "kube-apiserver"), k.apiArgs, dir); err != nil {
		return k, err
	}
	if err := k.waitAPIServer(90 * time.Second); err != nil {
		return k, err
	}
	return k, nil
}

func (k *Kube) writeCredentials() error {
	ca, err := newCA("fleetdns-test-ca")
	if err != nil {
		return err
	}
	srv, err := ca.issue("kube-apiserver", nil,
		[]net.IP{net.ParseIP(k.IP), net.ParseIP("127.0.0.1"), net.ParseIP("10.96.0.1")},
		[]string{"localhost", "kubernetes", "kubernetes.default", "kubernetes.default.svc", "kubernetes.default.svc.cluster.local"})
	if err != nil {
		return err
	}
	admin, err := ca.issue("fleetdns-admin", []string{"system:masters"}, nil, nil)
	if err != nil {
		return err
	}
	saKey, saPub, err := newServiceAccountKey()
	if err != nil {
		return err
	}
	k.ca, k.admin = ca, admin
	files := map[string][]byte{
		"ca.crt":        ca.certPEM,
		"apiserver.crt": srv.certPEM,
		"apiserver.key": srv.keyPEM,
		"admin.crt":     admin.certPEM,
		"admin.key":     admin.keyPEM,
		"sa.key":        saKey,
		"sa.pub":        saPub,
	}
	for name, b := range files {
		if err := os.WriteFile(filepath.Join(k.Dir, name), b, 0o600); err != nil {
			return err
		}
	}
	return nil
}

// adminConfig is built once the URL is known.
func (k *Kube) adminConfig() *rest.Config {
	return &rest.Config{
		Host: k.URL,
		TLSClientConfig: rest.TLSClientConfig{
			CAData:   k.ca.certPEM,
			CertData: k.admin.certPEM,
			KeyData:  k.admin.keyPEM,
		},
		QPS:     1000,
		Burst:   2000,
		Timeout: 30 * time.Second,
	}
}

func (k *Kube) waitEtcd(timeout time.Duration) error {
	cl := http.Client{Timeout: time.Second}
	msg, ok := testkit.Within(timeout, func() (bool, string) {
		if !k.Etcd.Running() {
			return false, fmt.Sprintf("etcd exited: %v", k.Etcd.ExitErr())
		}
		resp, err := cl.Get(k.EtcdURL + "/health")
		if err != nil {
			return false, err.Error()
		}
		resp.Body.Close()
		return resp.StatusCode == http.StatusOK, "etcd /health: " + resp.Status
	})
	if !ok {
		return fmt.Errorf("etcd not healthy within %v: %s", timeout, msg)
	}
	return nil
}

func (k *Kube) waitAPIServer(timeout time.Duration) error {
	if k.Config == nil {
		k.Config = k.adminConfig()
		path, err := k.writeKubeconfig("admin", "", k.admin)
		if err != nil {
			return err
		}
		k.Kubeconfig = path
	}
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(k.ca.certPEM)
	cert, err := tls.X509KeyPair(k.admin.certPEM, k.admin.keyPEM)
	if err != nil {
		return err
	}
	cl := http.Client{Timeout: 2 * time.Second, Transport: &http.Transport{
		TLSClientConfig: &tls.Config{RootCAs: pool, Certificates: []tls.Certificate{cert}},
	}}
	defer cl.CloseIdleConnections()
	msg, ok := testkit.Within(timeout, func() (bool, string) {
		if !k.APIServer.Running() {
			return false, fmt.Sprintf("kube-apiserver exited: %v", k.APIServer.ExitErr())
		}
		resp, err := cl.Get(k.URL + "/readyz")
		if err != nil {
			return false, err.Error()
		}
		resp.Body.Close()
		return resp.StatusCode == http.StatusOK, "/readyz: " + resp.Status
	})
	if !ok {
		return fmt.Errorf("kube-apiserver not ready within %v: %s", timeout, msg)
	}
	return nil
}

// writeKubeconfig writes a kubeconfig for a client certificate or a bearer
// token into Dir and returns its path.
func (k *Kube) writeKubeconfig(name, token string, cert *keyPair) (string, error) {
	var user string
	switch {
	case token != "":
		user = "    token: " + token + "\n"
	case cert != nil:
		user = "    client-certificate-data: " + b64(cert.certPEM) + "\n    client-key-data: " + b64(cert.keyPEM) + "\n"
	}
	cfg := fmt.Sprintf(`apiVersion: v1
kind: Config
clusters:
- name: fleetdns-test
  cluster:
    server: %s
    certificate-authority-data: %s
users:
- name: %s
  user:
%scontexts:
- name: %s
  context:
    cluster: fleetdns-test
    user: %s
current-context: %s
`, k.URL, b64(k.ca.certPEM), name, user, name, name, name)
	path := filepath.Join(k.Dir, "kubeconfig-"+strings.NewReplacer("/", "-", ":", "-").Replace(name))
	return path, os.WriteFile(path, []byte(cfg), 0o600)
}

// StopAPIServer stops kube-apiserver (SIGTERM, SIGKILL after 5 s: with open
// watches its graceful shutdown can take longer); etcd keeps running.
func (k *Kube) StopAPIServer() { k.APIServer.stop(sigterm, 5*time.Second) }

// KillAPIServer kills kube-apiserver with SIGKILL (a crash).
func (k *Kube) KillAPIServer() { k.APIServer.Kill() }

// StartAPIServer starts a stopped kube-apiserver again on the same address
// and waits until it is ready.
func (k *Kube) StartAPIServer(t testing.TB) {
	t.Helper()
	if k.APIServer.Running() {
		t.Fatal("StartAPIServer: kube-apiserver is running")
	}
	if err := k.APIServer.start(); err != nil {
		t.Fatal(err)
	}
	if err := k.waitAPIServer(90 * time.Second); err != nil {
		t.Fatal(err)
	}
}

// RestartAPIServer stops and starts kube-apiserver.
func (k *Kube) RestartAPIServer(t testing.TB) {
	t.Helper()
	k.StopAPIServer()
	k.StartAPIServer(t)
}

// StopEtcd stops etcd (SIGTERM); kube-apiserver keeps running and fails its
// storage calls until etcd returns.
func (k *Kube) StopEtcd() { k.Etcd.Stop() }

// StartEtcd starts a stopped etcd again on its data and waits for its health,
// then for kube-apiserver's readiness.
func (k *Kube) StartEtcd(t testing.TB) {
	t.Helper()
	if k.Etcd.Running() {
		t.Fatal("StartEtcd: etcd is running")
	}
	if err := k.Etcd.start(); err != nil {
		t.Fatal(err)
	}
	if err := k.waitEtcd(60 * time.Second); err != nil {
		t.Fatal(err)
	}
	if k.APIServer.Running() {
		if err := k.waitAPIServer(90 * time.Second); err != nil {
			t.Fatal(err)
		}
	}
}

// RestartEtcd stops and starts etcd.
func (k *Kube) RestartEtcd(t testing.TB) {
	t.Helper()
	k.StopEtcd()
	k.StartEtcd(t)
}

// stop ends kube-apiserver before etcd (the other order hangs the API
// server), removes Dir and frees the address.
func (k *Kube) stop() {
	if k.APIServer != nil {
		k.APIServer.stop(sigterm, 5*time.Second)
		k.APIServer.logFile.Close()
	}
	if k.Etcd != nil {
		k.Etcd.Stop()
		k.Etcd.logFile.Close()
	}
	if k.Dir != "" {
		os.RemoveAll(k.Dir)
	}
	if k.releaseIP != nil {
		k.releaseIP()
	}
}

// Context is a context for one API call in a test: 30 s.
func Context(t testing.TB) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	t.Cleanup(cancel)
	return ctx
}

func tail(s string, n int) string {
	if len(s) > n {
		return "..." + s[len(s)-n:]
	}
	return s
}

// allocIP is NewIP for callers outside a test; release frees the address.
func allocIP() (string, func(), error) {
	if err := os.MkdirAll(lockDir, 0o777); err != nil {
		return "", nil, err
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
		return ip, func() { os.Remove(filepath.Join(lockDir, ip)) }, nil
	}
	return "", nil, errors.New("no free loopback address after 1000 tries")
}

func freePorts(ip string, n int) ([]int, error) {
	var ports []int
	var ls []net.Listener
	defer func() {
		for _, l := range ls {
			l.Close()
		}
	}()
	for len(ports) < n {
		l, err := net.Listen("tcp", net.JoinHostPort(ip, "0"))
		if err != nil {
			return nil, err
		}
		ls = append(ls, l)
		ports = append(ports, l.Addr().(*net.TCPAddr).Port)
	}
	return ports, nil
}
