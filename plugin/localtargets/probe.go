package localtargets

import (
	"bytes"
	"context"
	"crypto/tls"
	"fmt"
	"io"
	"net"
	"net/http"
	"strconv"
	"sync"
)

// check is one health check of p.
func (c *checker) check(ctx context.Context, p probeSpec) error {
	// Never reached through the query or a redirect, but checked here too:
	// whatever builds a probeSpec, the refused addresses are not dialled.
	if class := p.refusedBy(&c.hc); class != "" {
		return fmt.Errorf("%s: %s address not allowed", p.proto, class)
	}
	hostport := net.JoinHostPort(p.addr.String(), strconv.Itoa(int(p.port)))
	if p.proto == "tcp" {
		conn, err := (&net.Dialer{}).DialContext(ctx, "tcp", hostport)
		if err != nil {
			return err
		}
		return conn.Close()
	}

	req, err := http.NewRequestWithContext(ctx, http.MethodGet, p.proto+"://"+hostport+p.path, nil)
	if err != nil {
		return err
	}
	if p.host != "" {
		req.Host = p.host
	}
	resp, err := httpClient(p.host).Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	// Redirects are not followed: a 3xx is a live ingress.
	if resp.StatusCode < p.expectLo || resp.StatusCode > p.expectHi {
		return fmt.Errorf("%s: %s, want %d-%d", p, resp.Status, p.expectLo, p.expectHi)
	}
	if p.body == "" {
		io.Copy(io.Discard, io.LimitReader(resp.Body, 64<<10))
		return nil
	}
	body, err := io.ReadAll(io.LimitReader(resp.Body, 64<<10))
	if err != nil {
		return err
	}
	if !bytes.Contains(body, []byte(p.body)) {
		return fmt.Errorf("%s: the first 64 KiB of the body do not hold %q", p, p.body)
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
// check proves that the target still accepts them. The clients are as many
// as distinct server names: bounded by the checks.
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

// checkQueue is a min-heap of checks by due time.
