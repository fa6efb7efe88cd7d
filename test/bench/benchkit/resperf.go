package benchkit

import "regexp"

// Resperf is what one resperf run reports: the highest response rate of any
// of its plot intervals while the offered rate ramped up, and the share of
// queries lost at that point. A line missing from the output leaves its
// field zero.
type Resperf struct {
	MaxQPS  float64 // Maximum throughput, responses per second
	LostPct float64 // Lost at that point, percent (0-100)
	Sent    float64 // Queries sent
	Done    float64 // Queries completed
}

var (
	reMaxThroughput = regexp.MustCompile(`Maximum throughput:\s+([0-9.]+) qps`)
	reLostAtPoint   = regexp.MustCompile(`Lost at that point:\s+([0-9.]+)%`)
	reSent          = regexp.MustCompile(`Queries sent:\s+([0-9]+)`)
)

// ParseResperf reads resperf's statistics from its output.
func ParseResperf(out []byte) Resperf {
	return Resperf{
		MaxQPS:  submatch(reMaxThroughput, out, 1),
		LostPct: submatch(reLostAtPoint, out, 1),
		Sent:    submatch(reSent, out, 1),
		Done:    submatch(reDone, out, 1),
	}
}
