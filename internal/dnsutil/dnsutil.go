// Package dnsutil holds the DNS helpers that more than one fleetdns plugin
// needs and CoreDNS's plugin/pkg/dnsutil does not offer: a zone match that
// allocates nothing, for the query path, and the split of text into TXT
// character-strings.
package dnsutil

import "strings"

// ZoneOf returns the longest of zones that name is in, "" when none: what
// plugin.Zones.Matches returns, without its two allocations (dns.Split) per
// zone on every query. Zones are fully qualified.
func ZoneOf(zones []string, name string) (zone string) {
	for _, z := range zones {
		if len(z) > len(zone) && InZone(name, z) {
			zone = z
		}
	}
	return zone
}

// InZone reports whether name is zone or below it, both fully qualified:
// case-insensitive (RFC 4343), and a "\." inside a label is not a label
// boundary, as for plugin.Name.Matches.
func InZone(name, zone string) bool {
	if zone == "." {
		return true
	}
	i := len(name) - len(zone)
	if i < 0 || !strings.EqualFold(name[i:], zone) {
		return false
	}
	if i == 0 {
		return true
	}
	if name[i-1] != '.' {
		return false
	}
	escapes := 0
	for j := i - 2; j >= 0 && name[j] == '\\'; j-- {
		escapes++
	}
	return escapes%2 == 0
}

// TXTStrings splits text into TXT character-strings of at most 255 octets
// (RFC 1035 §3.3.14), written as miekg/dns reads them: a backslash in the
// text stays a backslash on the wire. Empty text is one empty string.
func TXTStrings(text string) []string {
	out := make([]string, 0, len(text)/255+1)
	for {
		n := min(len(text), 255)
		out = append(out, strings.ReplaceAll(text[:n], `\`, `\\`))
		text = text[n:]
		if text == "" {
			return out
		}
	}
}
