// Package delegation holds the end-to-end tests of gslb's
// publish_delegation: clusters (real coredns processes on loopback) publish
// their own NS record and glue by TSIG-signed RFC 2136 UPDATE into a real
// parent zone served by BIND 9's named or by Knot DNS, each with a key per
// cluster and a policy that confines it to the NS RRset and its own glue
// name, and find each other from that delegation (peers_from_ns). Faults
// are real: a key the policy does not allow, a wrong key, a parent that
// answers SERVFAIL or garbage.
package delegation
