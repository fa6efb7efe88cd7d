package k8scrd

import (
	"slices"
	"strings"

	"github.com/fleetdns/fleetdns/plugin/k8scrd/derive"
	"github.com/fleetdns/fleetdns/plugin/k8scrd/object"

	"github.com/coredns/caddy"
	"github.com/fleetdns/fleetdns/internal/corefile"
)

// parseNameConvention parses one of the words `hostname_annotation KEY...`,
// `service_names` and `relative_hosts` at c's cursor into n.
func parseNameConvention(c *caddy.Controller, n *derive.NameConventions) error {
	switch word := c.Val(); word {
	case "hostname_annotation":
		args := corefile.Args(c)
		if len(args) == 0 {
			return c.ArgErr()
		}
		n.Annotations = n.Annotations[:0]
		for _, a := range args {
			if !slices.Contains(object.HostnameAnnotations, a) {
				return c.Errf("hostname_annotation %q: want some of %s", a, strings.Join(object.HostnameAnnotations, " "))
			}
			if slices.Contains(n.Annotations, a) {
				return c.Errf("hostname_annotation %q: named twice", a)
			}
			n.Annotations = append(n.Annotations, a)
		}
	case "service_names", "relative_hosts":
		if corefile.NextArg(c) {
			return c.ArgErr()
		}
		if word == "service_names" {
			n.ServiceNames = true
		} else {
			n.RelativeHosts = true
		}
	default:
		return c.Errf("unknown property %q", word)
	}
	return nil
}
