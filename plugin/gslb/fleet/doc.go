// Package fleet is the wire protocol between the gslb plugins of a fleet of
// clusters: each cluster publishes its view (every GSLB host it declares, with
// its healthy targets and its policy) as a DNS zone under the reserved name
// _fleet.<zone>, peers follow it by SOA query, IXFR (RFC 1995) and AXFR
// (RFC 5936), are told of a change by NOTIFY (RFC 1996), and all of it is
// signed with TSIG (RFC 8945) when keys are configured.
//
// The package imports no plugin of this repository: plugin/gslb serves the
// Publisher at _fleet.<zone>, runs one Follower per peer and owns the peers.
// See plugin/gslb/README.md for the Corefile side.
//
// # The view zone
//
// For the gslb zone example.org the view is the zone _fleet.example.org:
//
//	_fleet.example.org.              5 SOA  example.org. hostmaster._fleet.example.org. SERIAL 30 10 86400 5
//	_fleet.example.org.              5 NS   example.org.
//	www.h._fleet.example.org.       30 A    198.18.0.1
//	www.h._fleet.example.org.       30 AAAA 2001:db8::1
//	www.h._fleet.example.org.       30 TXT  "gslb/strategy=roundrobin" "gslb/weight=3"
//	h._fleet.example.org.           30 TXT  ""
//	<hash>.l._fleet.example.org.    30 PTR  very.long.name.example.org.
//	<hash>.l._fleet.example.org.    30 TXT  "gslb/strategy=failover"
//
// Owner names. A host is written under h._fleet.<zone> with its labels
// relative to the zone: www.example.org becomes www.h._fleet.example.org, and
// a host at the zone apex (example.org itself) becomes h._fleet.example.org.
// A host whose owner name would not fit in 255 octets (the name is 9 octets
// longer than the host) is written under l._fleet.<zone> instead, at the
// label <hash> (the first 26 characters of the lower-case base32hex of the
// SHA-256 of the host's lower-case fully qualified name), with a PTR record
// naming the host. A reader takes the host from the owner under h., from the
// PTR under l. (checking that the hash matches).
//
// Records. Every host has exactly one TXT record: one character-string per
// policy property, "key=value" sorted by key (the host's gslb/* properties;
// a property of at most 255 octets, a policy of at most 4,096), or a single
// empty string when it has none, so that a host declared with no healthy
// target is still in the view. Its healthy targets are A and AAAA records,
// sorted and without duplicates (an IPv4-mapped IPv6 address is an A). All
// of a host's records carry the host's TTL. The apex SOA's MNAME and the
// apex NS name the gslb zone, whose servers are the ones that serve the
// view; the SOA asks a stock secondary to poll every 30 s (NOTIFY makes it
// sooner) and to keep serving for a day without the primary. A reader skips
// record types and names it does not know (they still count against the
// caps), so a later version may add some.
//
// Serving. The Publisher answers SOA, NS and every name of the view (kdig
// can read one host), NXDOMAIN or NODATA with the SOA otherwise; AXFR and
// IXFR over TCP in compressed messages of up to 60 KiB of records; IXFR over
// UDP with the SOA alone (RFC 1995 §2); AXFR over UDP REFUSED. Before its
// first Set it answers SERVFAIL: a restarted cluster never publishes an empty
// view that would make its peers drop its hosts.
//
// # The serial
//
// The SOA serial moves when the view changes, and never backwards in one
// publisher. A cluster's view is often served by several replicas behind one
// address (a Deployment behind a Service), and a peer reaches any of them:
// their serials must agree for the same view, or the peer would transfer the
// view at every check, or see it go back. So the serial is derived from the
// data (SetData), not from the moment a replica saw it:
//
//   - Its base is the data serial, the record store's SOA serial of the zone,
//     which replicas serving the same objects share (an etcd revision, a
//     file time, or the serial of an SOA in the data), shifted left by 8:
//     data << 8, modulo 2^32. A new view, or a new data serial with the same
//     view, is published at that base when it is larger (RFC 1982): the
//     view's serial follows the data even when the view did not change, so
//     that a replica that starts later agrees with those that saw the
//     changes.
//   - A change of the view that the data serial does not count (a health
//     verdict of this replica's checks, a target that the EndpointSlices
//     withdraw) takes the last serial plus one. Replicas that saw the same
//     changes since the data last moved agree; one that missed a change (it
//     started after it) is behind until the data moves again. After 255
//     such changes the serial runs into the next data serial's place, still
//     increasing (replicas may then differ until the data moves past it).
//   - Forward means newer data: a replica that has not seen a change yet
//     answers a serial behind the one a peer holds. A Follower refuses it
//     (ReasonBackwards, the peer is up) and keeps the newer view; it takes
//     the lower serial only after SetMaxBehind of nothing else (the peer's
//     data went back for good: restored, re-created). Because replicas may
//     hold different views at one serial (one restarted and counts its
//     verdict changes from the base again), a Follower that saw a serial
//     behind the view it holds transfers the next view whole (AXFR, no
//     IXFR) and verifies the serial it holds once the same way.
//
// A data serial is compared across 2^23 steps at most (8 million etcd
// writes, or 97 days of file times, between two checks of a peer). Set,
// without a data serial, takes the clock: the Unix time in sixteenths of a
// second modulo 2^32, or the previous serial plus one when that is not
// larger; so it is strictly increasing, and after a restart larger than
// anything published before as long as it never ran ahead of the clock by
// more than the restart took.
//
// # Caps
//
// A view is capped in hosts, records and octets (Limits; DefaultLimits is
// 50,000 hosts, 500,000 records, 64 MiB). A Publisher publishes at most that
// much, counting the octets uncompressed with 1/32 left for the messages'
// headers (the hosts past a cap, in name order, are left out and logged); a
// Follower counts the octets it reads from the wire, refuses a transfer that
// exceeds any cap whole, as soon as it does, and keeps its last good view. A
// Publisher keeps a journal of at most 64 recent changes holding no more
// records than the records cap, to answer IXFR; a client whose serial is not
// in it, or whose changes would be longer than the view, gets the whole view
// (RFC 1995 §4). Hosts with thousands of targets are capped by the records
// cap only.
//
// # NOTIFY
//
// Publisher.Notify sends a NOTIFY (RFC 1996) with the SOA to each peer in
// the background: at most one in flight per peer and one more pending behind
// it, retried after 250 ms, 500 ms, 1 s and 2 s when unanswered or the
// peer is unreachable, as while it restarts (a NOTIFY
// lost for good costs the peer one refresh). IsNotify and AnswerNotify are
// for the receiving side, which decides whom to accept.
//
// # TSIG
//
// Keys come from a file in BIND's tsig-keygen format (LoadKeys), one or two
// keys: the first signs, either verifies, so a fleet rotates by adding the
// new key second, then first, then removing the old. With keys set, a
// Publisher refuses (REFUSED) every unsigned or wrongly signed request and
// signs every message of its answers with the request's key, and a Follower
// refuses an answer of which any message is unsigned or wrongly signed. The
// dns.Server that runs the Publisher must know the secrets (Keys.Secrets as
// its TsigSecret; in CoreDNS, dnsserver.Config.TsigSecret) so that the
// request's TSIG is verified and the answer signed.
//
// # Metrics
//
//   - coredns_gslb_fleet_view_requests_total{type}: requests for the view
//     answered, type query, ixfr, ixfr_full (the whole view to an IXFR),
//     ixfr_soa (the SOA alone) or axfr.
//   - coredns_gslb_fleet_view_refused_total{reason}: requests refused, reason
//     tsig, axfr (a transfer over UDP or of another name) or zone.
//   - coredns_gslb_fleet_notifies_sent_total{result}: NOTIFYs sent, result
//     ok, refused, error or timeout (after the retries).
//
// A Follower's errors carry a bounded reason (Reason) for the caller's
// metrics.
package fleet
