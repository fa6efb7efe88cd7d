package fleet

import "time"

// serialTicks is how many serials a second of the clock is worth: a serial
// runs ahead of the clock only with more changes than that a second,
// sustained, and gslb gathers changes over 100 ms before it publishes them.
const serialTicks = 16

// dataShift is how far a data serial is shifted left in the view's serial:
// the low bits count the changes of the view that the data serial does not
// account for (health verdicts), 255 of them before the view's serial
// borrows the next data serial's place (see the package doc).
const dataShift = 8

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

// viewSerial is the place of a data serial (the record store's SOA serial
// of the zone) among the view's serials: data << 8, modulo 2^32.
func viewSerial(data uint32) uint32 { return data << dataShift }

// nextSerial is the serial after prev (none when first) for a view whose
// base is base (the clock's serial, or viewSerial of the data's): base when
// that is larger, else prev+1, so it is strictly increasing in one
// publisher, and equal in publishers that saw the same data and the same
// changes (see the package doc).
func nextSerial(prev uint32, first bool, base uint32) uint32 {
	if first || serialLess(prev, base) {
		return base
	}
	return prev + 1
}
