package splitdns

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"time"

	"github.com/coredns/coredns/plugin"
	"github.com/coredns/coredns/plugin/pkg/parse"
)

// The two keys of a kube-dns ConfigMap, files when the ConfigMap is mounted
// as a folder:
//
//	stubDomains:         {"acme.local": ["1.2.3.4", "1.2.3.5:5353"]}
//	upstreamNameservers: ["8.8.8.8", "8.8.4.4"]
const (
	stubDomainsFile         = "stubDomains"
	upstreamNameserversFile = "upstreamNameservers"
)

// kubeDNSInterval is how often the files are read to see whether they changed.
var kubeDNSInterval = 2 * time.Second

// kubeDNS is what the kube-dns files say, upstreams normalized to ip:port.
type kubeDNS struct {
	stubDomains         map[string][]string
	upstreamNameservers []string
}

// kubeDNSFiles is the raw content of the two files; a missing file is empty.
type kubeDNSFiles struct{ stubDomains, upstreamNameservers []byte }

func (f kubeDNSFiles) equal(g kubeDNSFiles) bool {
	return bytes.Equal(f.stubDomains, g.stubDomains) && bytes.Equal(f.upstreamNameservers, g.upstreamNameservers)
}

func readKubeDNSFiles(dir string) (kubeDNSFiles, error) {
	var f kubeDNSFiles
	var err error
	if f.stubDomains, err = readOptional(filepath.Join(dir, stubDomainsFile)); err != nil {
		return f, err
	}
	f.upstreamNameservers, err = readOptional(filepath.Join(dir, upstreamNameserversFile))
	return f, err
}

func readOptional(path string) ([]byte, error) {
	b, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	return b, err
}

// parse turns the files into routes. A file that is not valid JSON is an
// error (the caller keeps what it had); a single bad entry is left out,
// logged and counted, and the rest is used.
func (f kubeDNSFiles) parse() (kubeDNS, error) {
	kd := kubeDNS{stubDomains: map[string][]string{}}
	if len(bytes.TrimSpace(f.stubDomains)) > 0 {
		var stubs map[string][]string
		if err := json.Unmarshal(f.stubDomains, &stubs); err != nil {
			return kd, fmt.Errorf("%s: %w", stubDomainsFile, err)
		}
		for zone, servers := range stubs {
			zones := plugin.Host(zone).NormalizeExact()
			if len(zones) == 0 || zones[0] == "." {
				log.Errorf("%s: zone %q is not a domain, left out", stubDomainsFile, zone)
				kubeDNSErrorCount.Inc()
				continue
			}
			if addrs := kubeDNSServers(stubDomainsFile+" "+zone, servers); len(addrs) > 0 {
				kd.stubDomains[zones[0]] = addrs
			}
		}
	}
	if len(bytes.TrimSpace(f.upstreamNameservers)) > 0 {
		var servers []string
		if err := json.Unmarshal(f.upstreamNameservers, &servers); err != nil {
			return kd, fmt.Errorf("%s: %w", upstreamNameserversFile, err)
		}
		kd.upstreamNameservers = kubeDNSServers(upstreamNameserversFile, servers)
	}
	return kd, nil
}

// kubeDNSServers normalizes "ip[:port]" entries to ip:port, port 53 by default.
func kubeDNSServers(what string, servers []string) []string {
	addrs := make([]string, 0, len(servers))
	for _, s := range servers {
		a, err := parse.HostPort(s, "53")
		if err != nil {
			log.Errorf("%s: %v, left out", what, err)
			kubeDNSErrorCount.Inc()
			continue
		}
		addrs = append(addrs, a)
	}
	return addrs
}

// watchKubeDNS reads the kube-dns files every kubeDNSInterval and swaps in a
// new routing table when they changed, so that an edited ConfigMap takes
// effect without a restart. Content is compared, not modification times: a
// mounted ConfigMap changes by swapping a symbolic link.
func (s *SplitDNS) watchKubeDNS(last kubeDNSFiles) {
	tick := time.NewTicker(kubeDNSInterval)
	defer tick.Stop()
	for {
		select {
		case <-s.stop:
			return
		case <-tick.C:
		}
		files, err := readKubeDNSFiles(s.cfg.kubedns)
		if err != nil {
			log.Errorf("kubedns %s: %v; keeping the current routes", s.cfg.kubedns, err)
			kubeDNSErrorCount.Inc()
			continue
		}
		if files.equal(last) {
			continue
		}
		last = files
		kd, err := files.parse()
		if err != nil {
			log.Errorf("kubedns %s: %v; keeping the current routes", s.cfg.kubedns, err)
			kubeDNSErrorCount.Inc()
			continue
		}
		t, errs := s.build(kd)
		for _, e := range errs {
			log.Errorf("kubedns %s: %v; left out", s.cfg.kubedns, e)
			kubeDNSErrorCount.Inc()
		}
		s.swap(t)
		kubeDNSReloadCount.Inc()
		log.Infof("kubedns %s changed: %d stub domains, %d upstream nameservers", s.cfg.kubedns, len(kd.stubDomains), len(kd.upstreamNameservers))
	}
}
