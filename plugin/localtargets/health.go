package localtargets

import (
	"context"
	"crypto/tls"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/netip"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/fleetdns/fleetdns/internal/store"
)

// healthCheck is the healthcheck stanza: how one target is checked.
type healthCheck struct {
	proto    string // tcp, http or https
	port     int
	path     string
	host     string // Host header and TLS server name for http(s)
	interval time.Duration
	timeout  time.Duration
	fails    int // consecutive failures that make a healthy target unhealthy
	passes   int // consecutive passes that make an unhealthy target healthy
}

func newHealthCheck() healthCheck {
	return healthCheck{interval: 5 * time.Second, timeout: time.Second, fails: 3, passes: 2}
}

// targetState is where a target stands. A target starts unknown and is
// served only once it is healthy.
type targetState int

const (
	stateUnknown targetState = iota
	stateHealthy
	stateUnhealthy
)

func (s targetState) String() string {
	switch s {
	case stateHealthy:
		return "healthy"
	case stateUnhealthy:
		return "unhealthy"
	}
	return "unknown"
}

// running holds the running checker for each configuration. On a reload
// CoreDNS starts the new instance before it stops the old one: the new
// checker starts from what the old one knew instead of from unknown, so a
// reload never makes this cluster advertise no targets until the first
// checks come back.
var (
	runningMu sync.Mutex
	running   = map[string]*checker{}
)

// checker runs one background loop per target and publishes the set of
// healthy targets as an immutable snapshot that the query path loads.
type checker struct {
	hc     healthCheck
	zones  []string
	prefix string
	reader store.Store
	probe  func(ctx context.Context, addr netip.Addr) error

	healthy atomic.Pointer[healthySet]
	ready   atomic.Bool

	mu      sync.Mutex
	targets map[netip.Addr]*target

	// inherited is the state of the targets of the checker this one took
	// over from on a reload; a target found in it starts from there.
	inherited map[netip.Addr]target

	ctx    context.Context
	cancel context.CancelFunc
	wg     sync.WaitGroup
}

type target struct {
	addr    netip.Addr
	state   targetState
	checked bool
	passRun int
	failRun int
	cancel  context.CancelFunc
}

// healthySet is an immutable set of healthy targets.
type healthySet map[netip.Addr]struct{}

// filter returns addrs without the targets not in s: addrs itself when all
// are in s.
func (s healthySet) filter(addrs []netip.Addr) []netip.Addr {
	for i, ip := range addrs {
		if _, ok := s[ip]; ok {
			continue
		}
		out := make([]netip.Addr, i, len(addrs)-1)
		copy(out, addrs[:i])
		for _, ip := range addrs[i+1:] {
			if _, ok := s[ip]; ok {
				out = append(out, ip)
			}
		}
		return out
	}
	return addrs
}

func newChecker(hc healthCheck, zones []string, prefix string, reader store.Store) *checker {
	c := &checker{hc: hc, zones: zones, prefix: prefix, reader: reader, targets: map[netip.Addr]*target{}}
	c.probe = c.check
	c.healthy.Store(&healthySet{})
	return c
}

func (c *checker) snapshot() healthySet { return *c.healthy.Load() }

// key identifies the configuration: a reloaded Corefile with the same
// stanza takes over the state of the running checker.
func (c *checker) key() string {
	return fmt.Sprintf("%q %q %+v", c.zones, c.prefix, c.hc)
}

func (c *checker) start() {
	runningMu.Lock()
	if prev := running[c.key()]; prev != nil && prev != c {
		prev.mu.Lock()
		c.inherited = make(map[netip.Addr]target, len(prev.targets))
		for addr, t := range prev.targets {
			c.inherited[addr] = target{state: t.state, checked: t.checked, passRun: t.passRun, failRun: t.failRun}
		}
		prev.mu.Unlock()
		c.healthy.Store(prev.healthy.Load())
		c.ready.Store(prev.ready.Load())
	}
	running[c.key()] = c
	runningMu.Unlock()

	c.ctx, c.cancel = context.WithCancel(context.Background())
	changed, cancel := c.reader.Subscribe()
	c.wg.Add(1)
	go func() {
		defer c.wg.Done()
		defer cancel()
		// Targets follow the store: a change is scanned for targets that
		// appeared or went away when the store publishes it, not on a timer.
		for {
			c.rescan()
			select {
			case <-c.ctx.Done():
				return
			case <-changed:
			}
		}
	}()
}

func (c *checker) stop() {
	if c.cancel == nil {
		return
	}
	c.cancel()
	c.wg.Wait()
	runningMu.Lock()
	successor := running[c.key()] != c
	if !successor {
		delete(running, c.key())
	}
	runningMu.Unlock()
	if successor {
		return // the successor's targets keep their series
	}
	c.mu.Lock()
	for addr := range c.targets {
		targetHealthy.DeleteLabelValues(addr.String())
	}
	c.mu.Unlock()
}

// rescan starts checks for targets that appeared in the store and stops
// those of targets that are gone.
func (c *checker) rescan() {
	if !c.reader.Synced() {
		return
	}
	seen := map[netip.Addr]struct{}{}
	for _, zone := range c.zones {
		c.reader.Hosts(zone, func(h *store.Host) bool {
			// Literal localtargets- names and k8gb's objects are served as
			// written: their targets are other clusters' or already judged.
			switch store.Classify(h, c.prefix) {
			case store.Verbatim, store.LocalTargets:
				return true
			}
			for _, ip := range h.A {
				seen[ip] = struct{}{}
			}
			for _, ip := range h.AAAA {
				seen[ip] = struct{}{}
			}
			return true
		})
	}

	c.mu.Lock()
	defer c.mu.Unlock()
	changed := false
	for addr, t := range c.targets {
		if _, ok := seen[addr]; !ok {
			t.cancel()
			delete(c.targets, addr)
			targetHealthy.DeleteLabelValues(addr.String())
			changed = true
		}
	}
	for addr := range seen {
		if _, ok := c.targets[addr]; ok {
			continue
		}
		ctx, cancel := context.WithCancel(c.ctx)
		t := &target{addr: addr, cancel: cancel}
		if prev, ok := c.inherited[addr]; ok {
			t.state, t.checked, t.passRun, t.failRun = prev.state, prev.checked, prev.passRun, prev.failRun
		} else {
			targetHealthy.WithLabelValues(addr.String()).Set(0)
			changed = true // a new target: counted as unknown
		}
		c.targets[addr] = t
		c.wg.Add(1)
		go c.run(ctx, t)
	}
	c.inherited = nil // taken over by the targets found in the first scan
	if changed {
		c.publish()
	}
	c.updateReady()
}

// run checks one target every interval until ctx ends.
func (c *checker) run(ctx context.Context, t *target) {
	defer c.wg.Done()
	tick := time.NewTicker(c.hc.interval)
	defer tick.Stop()
	for {
		cctx, cancel := context.WithTimeout(ctx, c.hc.timeout)
		err := c.probe(cctx, t.addr)
		cancel()
		if ctx.Err() != nil {
			return
		}
		c.record(t, err)
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
	}
}

// record moves t through its states: unknown -> healthy on the first pass,
// unknown -> unhealthy on the first failure, healthy -> unhealthy after
// `fails` failures in a row, unhealthy -> healthy after `passes` passes.
func (c *checker) record(t *target, err error) {
	result := "pass"
	if err != nil {
		result = "fail"
	}
	checkCount.WithLabelValues(result).Inc()

	c.mu.Lock()
	defer c.mu.Unlock()
	if c.targets[t.addr] != t {
		return // removed while the check ran
	}
	t.checked = true
	old := t.state
	if err == nil {
		t.passRun++
		t.failRun = 0
		if old == stateUnknown || (old == stateUnhealthy && t.passRun >= c.hc.passes) {
			t.state = stateHealthy
		}
	} else {
		t.failRun++
		t.passRun = 0
		if old == stateUnknown || (old == stateHealthy && t.failRun >= c.hc.fails) {
			t.state = stateUnhealthy
		}
	}
	v := 0.0
	if t.state == stateHealthy {
		v = 1
	}
	targetHealthy.WithLabelValues(t.addr.String()).Set(v)
	if t.state != old {
		if t.state == stateHealthy {
			log.Infof("Target %s is healthy (%s check passed)", t.addr, c.hc.proto)
		} else {
			log.Warningf("Target %s is unhealthy: %v", t.addr, err)
		}
		c.publish()
	}
	c.updateReady()
}

// publish swaps in a new healthy set; c.mu is held.
func (c *checker) publish() {
	set := healthySet{}
	counts := map[targetState]float64{}
	for addr, t := range c.targets {
		counts[t.state]++
		if t.state == stateHealthy {
			set[addr] = struct{}{}
		}
	}
	c.healthy.Store(&set)
	for _, s := range []targetState{stateUnknown, stateHealthy, stateUnhealthy} {
		targetsByState.WithLabelValues(s.String()).Set(counts[s])
	}
}

// updateReady latches ready once every target known has been checked; c.mu
// is held.
func (c *checker) updateReady() {
	if c.ready.Load() {
		return
	}
	for _, t := range c.targets {
		if !t.checked {
			return
		}
	}
	c.publish()
	c.ready.Store(true)
}

// check is one health check of addr.
func (c *checker) check(ctx context.Context, addr netip.Addr) error {
	hostport := net.JoinHostPort(addr.String(), strconv.Itoa(c.hc.port))
	if c.hc.proto == "tcp" {
		conn, err := (&net.Dialer{}).DialContext(ctx, "tcp", hostport)
		if err != nil {
			return err
		}
		return conn.Close()
	}

	req, err := http.NewRequestWithContext(ctx, http.MethodGet, c.hc.proto+"://"+hostport+c.hc.path, nil)
	if err != nil {
		return err
	}
	if c.hc.host != "" {
		req.Host = c.hc.host
	}
	resp, err := httpClient(c.hc.host).Do(req)
	if err != nil {
		return err
	}
	io.Copy(io.Discard, io.LimitReader(resp.Body, 64<<10))
	resp.Body.Close()
	// Redirects are not followed: a 3xx is a live ingress.
	if resp.StatusCode < 200 || resp.StatusCode >= 400 {
		return fmt.Errorf("%s %s: %s", c.hc.proto, hostport+c.hc.path, resp.Status)
	}
	return nil
}

var (
	clientsMu sync.Mutex
	clients   = map[string]*http.Client{}
)

// httpClient returns a client for a TLS server name. Certificates are not
// verified: a health check asks whether the target serves, not who it is,
// and targets are addressed by IP. Connections are not reused, so that each
// check proves that the target still accepts them.
func httpClient(serverName string) *http.Client {
	clientsMu.Lock()
	defer clientsMu.Unlock()
	if cl, ok := clients[serverName]; ok {
		return cl
	}
	cl := &http.Client{
		Transport: &http.Transport{
			Proxy:             nil,
			DisableKeepAlives: true,
			TLSClientConfig:   &tls.Config{ServerName: serverName, InsecureSkipVerify: true}, //nolint:gosec // see above
		},
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
	}
	clients[serverName] = cl
	return cl
}
