package fleet

import "time"

// serialLess reports a < b in RFC 1982 serial number arithmetic (32 bits).
func serialLess(a, b uint32) bool {
	return a != b && (b-a) < 1<<31
}

// nextSerial is the serial after prev (none when first): the Unix time when
// that is larger, else prev+1, so it is strictly increasing and restarts
// from the clock (see the package doc).
func nextSerial(prev uint32, first bool, now time.Time) uint32 {
	t := uint32(now.Unix())
	if first || serialLess(prev, t) {
		return t
	}
	return prev + 1
}
