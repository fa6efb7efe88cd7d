package fleet

import "github.com/miekg/dns"

// IsNotify reports whether r is a NOTIFY for the view of zone (opcode NOTIFY,
// question _fleet.<zone> SOA IN), and the serial it carries (RFC 1996 §3.7,
// 0 when absent).
func IsNotify(r *dns.Msg, zone string) (serial uint32, ok bool) { return 0, false }

// AnswerNotify writes the answer to NOTIFY r with rcode (dns.RcodeSuccess or
// dns.RcodeRefused), signed when r was validly signed.
func AnswerNotify(w dns.ResponseWriter, r *dns.Msg, rcode int) error { return nil }
