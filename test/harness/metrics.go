package harness

import (
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"
)

// Metrics is one scrape of a Prometheus text exposition (/metrics).
type Metrics struct {
	Text    string // the page as served
	samples []sample
}

type sample struct {
	name   string
	labels map[string]string
	value  float64
}

// Scrape reads the metrics page of url: "http://host:port/metrics", or a
// bare "host:port" (then /metrics on it). It fails the test when the server
// does not answer within 10 s.
func Scrape(t testing.TB, url string) Metrics {
	t.Helper()
	m, err := ScrapeMetrics(url)
	if err != nil {
		t.Fatal(err)
	}
	return m
}

// ScrapeMetrics is Scrape for a goroutine other than the test's: it returns
// the error instead of failing the test.
func ScrapeMetrics(url string) (Metrics, error) {
	if !strings.Contains(url, "://") {
		url = "http://" + url + "/metrics"
	}
	c := http.Client{Timeout: 10 * time.Second}
	resp, err := c.Get(url)
	if err != nil {
		return Metrics{}, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		return Metrics{}, fmt.Errorf("%s: %v", url, err)
	}
	return ParseMetrics(string(b)), nil
}

// ParseMetrics reads a text exposition. Lines it cannot read (comments,
// HELP and TYPE) are left out.
func ParseMetrics(text string) Metrics {
	m := Metrics{Text: text}
	for _, line := range strings.Split(text, "\n") {
		if s, ok := parseSample(line); ok {
			m.samples = append(m.samples, s)
		}
	}
	return m
}

// Sum returns the sum of the samples of name whose labels hold every
// key/value pair of labels ("peer", "us", "state", "up"), each matched
// whole; 0 when there is none.
func (m Metrics) Sum(name string, labels ...string) float64 {
	sum, _ := m.match(name, labels)
	return sum
}

// Value returns the one sample of name whose labels hold every pair of
// labels; ok is false when there is none or more than one, so an absent
// series is never read as 0.
func (m Metrics) Value(name string, labels ...string) (v float64, ok bool) {
	v, n := m.match(name, labels)
	return v, n == 1
}

// Series counts the samples whose name starts with prefix.
func (m Metrics) Series(prefix string) int {
	n := 0
	for _, s := range m.samples {
		if strings.HasPrefix(s.name, prefix) {
			n++
		}
	}
	return n
}

func (m Metrics) match(name string, labels []string) (sum float64, n int) {
	if len(labels)%2 != 0 {
		panic("harness.Metrics: labels are key, value pairs")
	}
next:
	for _, s := range m.samples {
		if s.name != name {
			continue
		}
		for i := 0; i < len(labels); i += 2 {
			if v, ok := s.labels[labels[i]]; !ok || v != labels[i+1] {
				continue next
			}
		}
		sum += s.value
		n++
	}
	return sum, n
}

// parseSample reads `name{k="v",...} value [timestamp]`.
func parseSample(line string) (sample, bool) {
	line = strings.TrimSpace(line)
	if line == "" || line[0] == '#' {
		return sample{}, false
	}
	s := sample{labels: map[string]string{}}
	i := strings.IndexAny(line, "{ ")
	if i <= 0 {
		return sample{}, false
	}
	s.name, line = line[:i], line[i:]
	if line[0] == '{' {
		line = line[1:]
		for {
			line = strings.TrimLeft(line, ", ")
			if strings.HasPrefix(line, "}") {
				line = line[1:]
				break
			}
			eq := strings.Index(line, `="`)
			if eq <= 0 {
				return sample{}, false
			}
			key := line[:eq]
			line = line[eq+2:]
			var v strings.Builder
			j := 0
			for ; j < len(line) && line[j] != '"'; j++ {
				if line[j] == '\\' && j+1 < len(line) {
					j++
					switch line[j] {
					case 'n':
						v.WriteByte('\n')
					default:
						v.WriteByte(line[j])
					}
					continue
				}
				v.WriteByte(line[j])
			}
			if j == len(line) {
				return sample{}, false
			}
			s.labels[key] = v.String()
			line = line[j+1:]
		}
	}
	f := strings.Fields(line)
	if len(f) == 0 {
		return sample{}, false
	}
	v, err := strconv.ParseFloat(f[0], 64)
	if err != nil {
		return sample{}, false
	}
	s.value = v
	return s, true
}
