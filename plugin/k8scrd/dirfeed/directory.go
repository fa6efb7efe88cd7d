package dirfeed

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/fleetdns/fleetdns/plugin/k8scrd/object"

	"github.com/fsnotify/fsnotify"
	networkingv1 "k8s.io/api/networking/v1"
	"sigs.k8s.io/external-dns/apis/v1alpha1"
	gatewayv1 "sigs.k8s.io/gateway-api/apis/v1"
	"sigs.k8s.io/yaml"
)

// Settle is how long a file must be quiet after an event before it is read:
// a file written in several pieces is read once, whole.
const Settle = 50 * time.Millisecond

// Feed is the folder feed: the source that reads manifests (YAML or JSON, one or more
// documents a file) from a folder and watches it: files created, changed,
// removed or renamed take effect without a restart. It serves DNSEndpoints
// and, with `resources`, derives Ingresses, Services and routes from the
// folder's objects as the API source does (objects.go).
type Feed struct {
	cfg *Config
	B   object.Sink
	dir string

	w    *fsnotify.Watcher
	done chan struct{}
	wg   sync.WaitGroup

	// owned by the watch goroutine (and start, before it runs)
	files   map[string]*ManifestFile // base name -> what it holds now
	derived map[string]*derivedFile  // derived object key -> what the builder has of it
	notes   map[string]bool          // the Gslb notes logged (source key + note), objects.go
}

// ManifestFile is what one file contributed at its last good read.
type ManifestFile struct {
	raw   []byte
	Mtime time.Time
	docs  map[string]string // object key -> the document's text (its version)
	// the cluster's own kinds: derived together with every other file's (derive)
	Sources  []fileSource
	Slices   []fileSlice
	Classes  []*networkingv1.IngressClass
	Gateways []*gatewayv1.Gateway
}

func New(cfg *Config, b object.Sink) *Feed {
	return &Feed{cfg: cfg, B: b, dir: cfg.Directory, files: map[string]*ManifestFile{}}
}

func (d *Feed) Start() error {
	st, err := os.Stat(d.dir)
	if err != nil {
		return fmt.Errorf("directory %s: %w", d.dir, err)
	}
	if !st.IsDir() {
		return fmt.Errorf("directory %s: not a directory", d.dir)
	}
	w, err := fsnotify.NewWatcher()
	if err != nil {
		return fmt.Errorf("directory %s: %w", d.dir, err)
	}
	if err := w.Add(d.dir); err != nil {
		w.Close()
		return fmt.Errorf("directory %s: %w", d.dir, err)
	}
	d.w = w
	d.done = make(chan struct{})
	d.Rescan()
	d.B.Synced()
	d.wg.Add(1)
	go d.watch()
	return nil
}

func (d *Feed) Stop() {
	if d.w == nil {
		return
	}
	close(d.done)
	d.w.Close()
	d.wg.Wait()
	d.w = nil
}

// watch turns file system events into reloads, each after the file settled.
func (d *Feed) watch() {
	defer d.wg.Done()
	due := map[string]time.Time{} // base name ("" = whole folder) -> when to read it
	t := time.NewTimer(time.Hour)
	defer t.Stop()
	for {
		select {
		case <-d.done:
			return
		case ev, ok := <-d.w.Events:
			if !ok {
				return
			}
			base := filepath.Base(ev.Name)
			if filepath.Dir(ev.Name) != filepath.Clean(d.dir) || strings.HasPrefix(base, "..") || isDir(ev.Name) {
				// A ConfigMap volume swaps a ..data symlink: the files themselves see no event.
				base = ""
			} else if !Manifest(base) {
				continue
			}
			due[base] = time.Now().Add(Settle)
			t.Reset(Settle)
		case err, ok := <-d.w.Errors:
			if !ok {
				return
			}
			object.SyncErrors.WithLabelValues("directory").Inc()
			log.Errorf("Watching %s: %v; rescanning", d.dir, err)
			due[""] = time.Now()
			t.Reset(0)
		case now := <-t.C:
			next := time.Duration(-1)
			for base, at := range due {
				if wait := at.Sub(now); wait > 0 {
					if next < 0 || wait < next {
						next = wait
					}
					continue
				}
				delete(due, base)
				if base == "" {
					d.Rescan()
				} else {
					d.Load(base)
				}
			}
			if next >= 0 {
				t.Reset(next)
			}
		}
	}
}

func isDir(path string) bool {
	st, err := os.Stat(path)
	return err == nil && st.IsDir()
}

// Manifest reports whether a file name is one this source reads.
func Manifest(base string) bool {
	if strings.HasPrefix(base, ".") {
		return false
	}
	switch strings.ToLower(filepath.Ext(base)) {
	case ".yaml", ".yml", ".json":
		return true
	}
	return false
}

// Rescan loads every manifest in the folder and forgets files that are gone.
func (d *Feed) Rescan() {
	entries, err := os.ReadDir(d.dir)
	if err != nil {
		object.SyncErrors.WithLabelValues("directory").Inc()
		log.Errorf("Reading %s: %v; serving the last data read", d.dir, err)
		return
	}
	present := map[string]bool{}
	var at time.Time
	changed := false
	read := func(base string) {
		if t, ok := d.read(base); ok {
			changed = true
			if t.After(at) {
				at = t
			}
		}
	}
	for _, e := range entries {
		if Manifest(e.Name()) {
			present[e.Name()] = true
			read(e.Name())
		}
	}
	for base := range d.files {
		if !present[base] {
			read(base)
		}
	}
	if changed && d.cfg.derives() {
		d.derive(at)
	}
}

// Load reads one file and hands what changed to the builder.
func (d *Feed) Load(base string) {
	if at, ok := d.read(base); ok && d.cfg.derives() {
		d.derive(at)
	}
}

// read reads one file and hands what changed of its DNSEndpoints to the
// builder. changed reports that the file's contents changed (the derived
// objects are to be derived again), at when.
func (d *Feed) read(base string) (at time.Time, changed bool) {
	path := filepath.Join(d.dir, base)
	old := d.files[base]
	raw, err := os.ReadFile(path)
	st, serr := os.Stat(path)
	if err == nil && serr == nil && st.IsDir() {
		err = errors.New("is a directory")
	}
	if err != nil {
		if !errors.Is(err, fs.ErrNotExist) {
			object.SyncErrors.WithLabelValues("directory").Inc()
			log.Errorf("Reading %s: %v; skipped", path, err)
		}
		if old != nil {
			now := time.Now()
			for key := range old.docs {
				// No file time is left: the deletion's time stands for it.
				d.B.RemoveAt(key, uint64(max(now.Unix(), 0)))
			}
			delete(d.files, base)
			return now, true
		}
		return time.Time{}, false
	}
	if old != nil && bytes.Equal(old.raw, raw) {
		return time.Time{}, false
	}
	p, perr := ParseFile(path, raw, st.ModTime(), d.cfg)
	if perr != nil && old != nil {
		// Most likely a file caught while being written, or a broken edit:
		// keep serving what it held at its last good read.
		log.Errorf("%v; file skipped, serving its previous contents", perr)
		object.InvalidEndpoints.WithLabelValues(object.ReasonDecode).Inc()
		return time.Time{}, false
	}
	if perr != nil {
		log.Errorf("%v; skipped", perr)
		object.InvalidEndpoints.WithLabelValues(object.ReasonDecode).Inc()
	}
	f := &ManifestFile{
		raw: raw, Mtime: st.ModTime(), docs: map[string]string{},
		Sources: p.Sources, Slices: p.Slices, Classes: p.Classes, Gateways: p.Gateways,
	}
	for _, doc := range p.Docs {
		f.docs[doc.Obj.Key] = doc.Text
		if old != nil && old.docs[doc.Obj.Key] == doc.Text {
			continue
		}
		for _, bad := range doc.Bad {
			object.InvalidEndpoints.WithLabelValues(bad.Reason).Inc()
			if bad.Reason != object.ReasonZone {
				log.Warningf("%s:%d: %s/%s: %s; skipped", path, doc.Line, doc.Obj.Namespace, doc.Obj.Name, bad.Msg)
			}
		}
		d.B.Upsert(doc.Obj)
	}
	if old != nil {
		for key := range old.docs {
			if _, ok := f.docs[key]; !ok {
				d.B.RemoveAt(key, uint64(max(st.ModTime().Unix(), 0)))
			}
		}
	}
	d.files[base] = f
	return st.ModTime(), true
}

// ManifestDoc is one DNSEndpoint read from a file.
type ManifestDoc struct {
	Obj  *object.Object
	Bad  []object.Invalid
	Text string
	Line int
}

var yamlLine = regexp.MustCompile(`line (\d+)`)

// ParseManifests reads every DNSEndpoint in a file (parseFile, for tests).
func ParseManifests(path string, raw []byte, mtime time.Time, cfg *Config) ([]ManifestDoc, error) {
	p, err := ParseFile(path, raw, mtime, cfg)
	return p.Docs, err
}

// ParseFile reads every object of a file that the directory reads: the
// DNSEndpoints, and the kinds of `resources` with what their derivation
// needs (fileKinds). Documents that do not parse, and kinds the directory
// never reads, are left out; the error names the first of them by file
// and line. A kind it knows but that no kind served needs is skipped
// silently: a folder of a whole application's manifests is normal.
func ParseFile(path string, raw []byte, mtime time.Time, cfg *Config) (*ParsedFile, error) {
	var (
		p     = &ParsedFile{}
		first error
		seen  = map[string]int{}
	)
	fail := func(line int, format string, args ...any) {
		msg := fmt.Sprintf(format, args...)
		if first == nil {
			first = fmt.Errorf("%s:%d: %s", path, line, msg)
		}
		p.Problems = append(p.Problems, fileProblem{Line: line, Msg: msg})
	}
	for _, doc := range splitDocuments(raw) {
		for _, it := range documentItems(doc, cfg, fail) {
			read, known := cfg.reads(it.Kind)
			switch {
			case !known:
				fail(doc.line, "kind %q is not one the directory reads (%s)", it.Kind, acceptedKinds)
				p.Problems[len(p.Problems)-1].kind = it.Kind
				p.Problems[len(p.Problems)-1].UnknownKind = true
				continue
			case !read:
				continue // known, and no kind served needs it
			}
			if it.Kind != object.KindDNSEndpoint {
				if want := fileKinds[it.Kind].apiVersion; it.APIVersion != want && !(it.Kind == object.KindGslb && it.APIVersion == object.GslbLegacyGroup+"/"+object.GslbVersion) {
					fail(doc.line, "%s apiVersion %q is not %s", it.Kind, it.APIVersion, want)
					continue
				}
				if err := p.addKind(cfg, path, doc.line, it.Kind, it.raw, seen); err != nil {
					fail(doc.line, "%v", err)
				}
				continue
			}
			if err := p.addDNSEndpoint(cfg, path, doc.line, it, mtime, seen); err != nil {
				fail(doc.line, "%v", err)
			}
		}
	}
	return p, first
}

// manifestItem is one object of a manifest document: its kind and
// apiVersion (which a typed list's items may leave out) and its JSON.
type manifestItem struct {
	APIVersion string            `json:"apiVersion"`
	Kind       string            `json:"kind"`
	Items      []json.RawMessage `json:"items"`
	raw        json.RawMessage
}

// documentItems decodes one YAML document into the objects it holds: the
// document itself, or the items of a List or of a typed list of a kind the
// directory knows. What does not decode is reported through fail (with the
// line) and left out.
func documentItems(doc document, cfg *Config, fail func(line int, format string, args ...any)) []manifestItem {
	js, err := yaml.YAMLToJSON(doc.text)
	if err != nil {
		line := doc.line
		if m := yamlLine.FindStringSubmatch(err.Error()); m != nil {
			n, _ := strconv.Atoi(m[1])
			line += n - 1
		}
		fail(line, "%v", err)
		return nil
	}
	if bytes.Equal(bytes.TrimSpace(js), []byte("null")) {
		return nil // empty document or comments only
	}
	var top manifestItem
	if err := json.Unmarshal(js, &top); err != nil {
		fail(doc.line, "not an object: %v", err)
		return nil
	}
	top.raw = js
	listOf := "" // a typed list's kind: its items may leave out kind and apiVersion
	if k, ok := strings.CutSuffix(top.Kind, "List"); ok && top.Kind != "List" {
		if _, known := cfg.reads(k); known {
			listOf = k
		}
	}
	if top.Kind != "List" && listOf == "" {
		return []manifestItem{top}
	}
	var items []manifestItem
	for _, item := range top.Items {
		var it manifestItem
		if err := json.Unmarshal(item, &it); err != nil {
			fail(doc.line, "not an object: %v", err)
			continue
		}
		it.raw = item
		if it.Kind == "" {
			it.Kind = listOf
		}
		if it.APIVersion == "" && listOf != "" {
			it.APIVersion = top.APIVersion
		}
		items = append(items, it)
	}
	return items
}

// addDNSEndpoint adds the DNSEndpoint it of the file at path (line: its
// document's) as an object, unless the namespaces and labels the block
// selects leave it out. seen counts the objects of each namespace/name in
// the file, so that two of one name stay two objects.
func (p *ParsedFile) addDNSEndpoint(cfg *Config, path string, line int, it manifestItem, mtime time.Time, seen map[string]int) error {
	var ep v1alpha1.DNSEndpoint
	if err := json.Unmarshal(it.raw, &ep); err != nil {
		return err
	}
	if ep.APIVersion == "" {
		ep.APIVersion = it.APIVersion
	}
	if g, _, _ := strings.Cut(ep.APIVersion, "/"); g != v1alpha1.GroupVersion.Group {
		return fmt.Errorf("apiVersion %q is not %s", ep.APIVersion, v1alpha1.GroupVersion)
	}
	ns := ep.Namespace
	if ns == "" {
		ns = "default"
	}
	if !cfg.Selects(ns, ep.Labels) {
		return nil // namespaces and labels filter files as they filter the API
	}
	id := ns + "/" + ep.Name
	key := "file:" + filepath.Base(path) + "#" + id
	if n := seen[id]; n > 0 {
		key += "#" + strconv.Itoa(n+1)
	}
	seen[id]++
	created := ep.CreationTimestamp.Time
	if created.IsZero() {
		created = mtime
	}
	o, bad := object.New(object.Meta{
		Key: key, Namespace: ns, Name: ep.Name,
		Created: created, Changed: mtime, Labels: ep.Labels,
		Version: uint64(max(mtime.Unix(), 0)), SOA: true,
	}, ep.Spec.Endpoints, cfg.Zones, cfg.TTL)
	p.Docs = append(p.Docs, ManifestDoc{Obj: o, Bad: bad, Text: string(it.raw), Line: line})
	return nil
}

type document struct {
	text []byte
	line int // first line of the document in the file, from 1
}

// splitDocuments splits a YAML stream at its "---" separator lines, keeping
// each document's first line number for messages.
func splitDocuments(raw []byte) []document {
	var (
		docs  []document
		start = 0
		line  = 1
		first = 1
	)
	for i := 0; i <= len(raw); {
		end := bytes.IndexByte(raw[i:], '\n')
		if end < 0 {
			end = len(raw) - i
		}
		l := raw[i : i+end]
		if bytes.HasPrefix(l, []byte("---")) && (len(l) == 3 || l[3] == ' ' || l[3] == '\t' || l[3] == '\r') {
			docs = append(docs, document{text: raw[start:i], line: first})
			start = i + end + 1
			first = line + 1
		}
		i += end + 1
		line++
	}
	if start < len(raw) {
		docs = append(docs, document{text: raw[start:], line: first})
	}
	return docs
}
