package builder

import (
	clog "github.com/coredns/coredns/plugin/pkg/log"
)

var log = clog.NewWithPlugin("k8scrd")

// Config is what the builder needs of a k8scrd block.
type Config struct {
	Zones []string // the block's zones, fully qualified, lower-case
	// TTL is the TTL of records without one and of the SOA and NS the
	// builder makes; NegTTL the SOA minimum (negative caching).
	TTL, NegTTL uint32
	// MName and RName are the SOA's fields ("" for ns1.<zone> and
	// hostmaster.<zone>); Refresh, Retry and Expire its timers.
	MName, RName           string
	Refresh, Retry, Expire uint32
	// Strict is `tenancy strict`: a name belongs to the namespace that
	// published it first. Grants are the `tenant` lines.
	Strict bool
	Grants Grants
	// FileVersions says that object versions are file times (the
	// directory feed), not resourceVersions: a change within the same
	// second still moves the serial.
	FileVersions bool
}
