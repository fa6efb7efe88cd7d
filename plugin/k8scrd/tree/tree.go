// Package tree is k8scrd's zone data and its lookup, as CoreDNS's file/tree
// is the file plugin's: immutable snapshots of all zones (names spread over
// shards, one node per name with its RRsets and the store.Host view), the
// answer to one question from one snapshot (RFC 1034 §4.3.2 with wildcards,
// delegations, CNAME chains), and the canonical order of names for zone
// transfers. The builder publishes snapshots; the query path, the transfer
// and the store reader only read them. It imports no plugin code.
package tree
