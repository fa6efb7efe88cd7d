package k8scrd

import (
	"slices"
	"strings"

	"github.com/coredns/caddy"
	"github.com/fleetdns/fleetdns/internal/corefile"
)

// parseNameConvention parses one of the words `hostname_annotation KEY...`,
// `service_names` and `relative_hosts` at c's cursor into n.
func parseNameConvention(c *caddy.Controller, n *nameConventions) error {
	switch word := c.Val(); word {
	case "hostname_annotation":
		args := corefile.Args(c)
		if len(args) == 0 {
			return c.ArgErr()
		}
		n.annotations = n.annotations[:0]
		for _, a := range args {
			if !slices.Contains(hostnameAnnotations, a) {
				return c.Errf("hostname_annotation %q: want some of %s", a, strings.Join(hostnameAnnotations, " "))
			}
			if slices.Contains(n.annotations, a) {
				return c.Errf("hostname_annotation %q: named twice", a)
			}
			n.annotations = append(n.annotations, a)
		}
	case "service_names", "relative_hosts":
		if corefile.NextArg(c) {
			return c.ArgErr()
		}
		if word == "service_names" {
			n.serviceNames = true
		} else {
			n.relativeHosts = true
		}
	default:
		return c.Errf("unknown property %q", word)
	}
	return nil
}
