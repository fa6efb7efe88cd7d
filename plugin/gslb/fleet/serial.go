package fleet

import "time"

// serialTicks is how many serials a second of the clock is worth: a serial
// runs ahead of the clock only with more changes than that a second,
// sustained, and gslb gathers changes over 100 ms before it publishes them.
const serialTicks = 16

// serialLess reports a < b in RFC 1982 serial number arithmetic (32 bits).
func serialLess(a, b uint32) bool {
	return a != b && (b-a) < 1<<31
}

// clockSerial is the serial of the clock: the Unix time in sixteenths of a
// second, modulo 2^32 (it wraps every 8.5 years, which serial arithmetic
// allows: only serials less than 4.25 years apart are compared).
func clockSerial(now time.Time) uint32 {
	return uint32(now.Unix()*serialTicks + int64(now.Nanosecond())/(int64(time.Second)/serialTicks))
}

// nextSerial is the serial after prev (none when first): the clock's when
// that is larger, else prev+1, so it is strictly increasing and restarts
// from the clock (see the package doc).
func nextSerial(prev uint32, first bool, now time.Time) uint32 {
	t := clockSerial(now)
	if first || serialLess(prev, t) {
		return t
	}
	return prev + 1
}
