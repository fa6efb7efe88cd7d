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

	if p.proto == "https" {
		ctx = context.WithValue(ctx, serverNameKey{}, p.host)
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, p.proto+"://"+hostport+p.path, nil)
	if err != nil {
		return err
	}
	if p.host != "" {
		req.Host = p.host
	}
	resp, err := checkClient.Do(req)
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

// serverNameKey carries a check's TLS server name to checkTransport's dial.
type serverNameKey struct{}

// checkClient makes every HTTP(S) check: one client and one transport for
// all, whatever their Host, so that tenants who vary Host values grow
// nothing. The TLS server name is the request's (from its context), set
// at dial time. Certificates are not verified: a health check asks whether
// the target serves, not who it is, and targets are addressed by IP.
// Connections are not reused, so that each check proves that the target
// still accepts them (and no connection carries one Host's SNI to another).
var checkClient = &http.Client{
	Transport: &http.Transport{
		Proxy:             nil,
		DisableKeepAlives: true,
		DialTLSContext: func(ctx context.Context, network, addr string) (net.Conn, error) {
			conn, err := (&net.Dialer{}).DialContext(ctx, network, addr)
			if err != nil {
				return nil, err
			}
			name, _ := ctx.Value(serverNameKey{}).(string)
			tc := tls.Client(conn, &tls.Config{ServerName: name, InsecureSkipVerify: true}) //nolint:gosec // see above
			if err := tc.HandshakeContext(ctx); err != nil {
				conn.Close()
				return nil, err
			}
			return tc, nil
		},
	},
	CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
}
