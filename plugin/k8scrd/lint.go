package k8scrd

import (
	"cmp"
	"encoding/json"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"

	"github.com/fleetdns/fleetdns/plugin/k8scrd/derive"
	"github.com/fleetdns/fleetdns/plugin/k8scrd/dirfeed"
	"github.com/fleetdns/fleetdns/plugin/k8scrd/object"

	"github.com/coredns/caddy"
	"github.com/coredns/caddy/caddyfile"
	"github.com/coredns/coredns/core/dnsserver"
	"github.com/coredns/coredns/plugin"
	"github.com/fleetdns/fleetdns/plugin/k8scrd/builder"
	"github.com/fleetdns/fleetdns/plugin/k8scrd/tree"
	"github.com/miekg/dns"
)

// The lint (`coredns -lint DIR -conf COREFILE`): the k8scrd blocks of a
// Corefile, parsed by setup's own parse, serve the manifests under DIR in
// place of their source, through the directory feed's reading and
// derivations and the builder's merge and tenancy; what each object would
// have served, and what not and why, is printed. It is the check a GitOps
// pipeline runs before it applies.

// Exit codes of the lint.
const (
	LintServed    = 0 // every name of every object is served
	LintNotServed = 1 // a name is refused or skipped
	LintBad       = 2 // a manifest does not parse, or the Corefile is bad
)

// lintBlock is one k8scrd block of the Corefile.
type lintBlock struct {
	where string // "Corefile:LINE"
	cfg   *config
}

// lintObject is one object of the folder, as the lint reports it.
type lintObject struct {
	pos                   string // "path:line"
	kind, namespace, name string
	obj                   *object.Object // nil: nothing of it reached the builder
	notes                 []lintNote
}

// lintNote is one thing of an object not served: the name ("" for the
// whole object), the Event reason it would carry, the message and, for a
// name k8s_gateway would serve, derive/names.go's reason (the label of
// coredns_k8scrd_unserved_names_total).
type lintNote struct {
	name, reason, msg string
	k8sGateway        string
}

// Lint lints the manifests under dir against the k8scrd blocks of the
// Corefile at corefile, writes one line per object and per name not
// served to out, and returns the exit code (LintServed, LintNotServed,
// LintBad).
//
// With asJSON, each line is a JSON object instead (JSON Lines): an object
// {"file", "line", "kind", "namespace", "name", "serves": [{"name",
// "types"}], "notServed": [{"name", "reason", "message", "k8sGateway"}]}
// (k8sGateway: for a name k8s_gateway would serve, derive/names.go's reason), an error
// {"file", "line", "error"}, a block {"block", "zones"} and a summary
// {"objects", "served", "zones"}.
func Lint(out io.Writer, dir, corefile string, asJSON bool) int {
	w := &lintOut{w: out, json: asJSON}
	blocks, err := lintBlocks(corefile)
	if err != nil {
		w.error("", 0, err.Error())
		return LintBad
	}
	files, err := lintFiles(dir)
	if err != nil {
		w.error("", 0, err.Error())
		return LintBad
	}
	code := LintServed
	for _, blk := range blocks {
		if len(blocks) > 1 {
			w.block(blk.where, blk.cfg.Zones)
		}
		code = max(code, lintBlockRun(w, dir, files, blk.cfg))
	}
	return code
}

// lintBlocks parses the k8scrd blocks of the Corefile with setup's parse.
func lintBlocks(corefile string) ([]lintBlock, error) {
	f, err := os.Open(corefile)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	// The directives of the binary when it registered ours; any otherwise
	// (a plugin test), so that the k8scrd blocks are still found.
	var valid []string
	if slices.Contains(dnsserver.Directives, "k8scrd") {
		valid = dnsserver.Directives
	}
	sbs, err := caddyfile.Parse(corefile, f, valid)
	if err != nil {
		return nil, err
	}
	var blocks []lintBlock
	for _, sb := range sbs {
		toks, ok := sb.Tokens["k8scrd"]
		if !ok {
			continue
		}
		c := caddy.NewTestController("dns", "")
		c.Dispenser = caddyfile.NewDispenserTokens(corefile, toks)
		// The server expands a key before the plugins see it (a CIDR
		// becomes its reverse zones): so does the lint.
		for _, key := range sb.Keys {
			c.ServerBlockKeys = append(c.ServerBlockKeys, plugin.Host(key).NormalizeExact()...)
		}
		k, err := parse(c)
		if err != nil {
			return nil, fmt.Errorf("plugin/k8scrd: %w", err)
		}
		blocks = append(blocks, lintBlock{where: fmt.Sprintf("%s:%d", corefile, toks[0].Line), cfg: k.cfg})
	}
	if len(blocks) == 0 {
		return nil, fmt.Errorf("%s: no k8scrd block", corefile)
	}
	return blocks, nil
}

// lintFiles lists the manifest files under dir, in its sub-folders too
// (a repository's tree, not only a mounted ConfigMap), in lexical order.
func lintFiles(dir string) ([]string, error) {
	var files []string
	err := filepath.WalkDir(dir, func(path string, e fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if e.IsDir() {
			if path != dir && strings.HasPrefix(e.Name(), ".") {
				return filepath.SkipDir
			}
			return nil
		}
		if dirfeed.Manifest(e.Name()) {
			files = append(files, path)
		}
		return nil
	})
	return files, err
}

// lintBlockRun lints the files for one block and prints the result.
func lintBlockRun(out *lintOut, dir string, paths []string, cfg *config) int {
	// The names k8s_gateway would serve that the block does not come from
	// the derivations (derive/names.go) to the lint's lines, not to the log.
	l := &lintBlockState{cfg: cfg, dc: cfg.dirConfig(), files: map[string]*dirfeed.ManifestFile{}, rel: map[string]string{}}
	cfg.Names.Unserved = func(_, _, _ string, names []derive.UnservedName) { l.unserved = append(l.unserved, names...) }
	l.dc.Names.Unserved = cfg.Names.Unserved
	defer func() { cfg.Names.Unserved = nil }()
	bad := false
	for _, path := range paths {
		if !l.read(out, dir, path) {
			bad = true
		}
	}
	l.derive()
	code := l.report(out)
	if bad {
		return LintBad
	}
	return code
}

// lintBlockState is what the lint of one block gathers: the objects it
// says something of, and the files' objects as the folder feed holds them.
type lintBlockState struct {
	cfg      *config
	dc       *dirfeed.Config
	objs     []*lintObject
	files    map[string]*dirfeed.ManifestFile // by path relative to the folder
	rel      map[string]string                // files key -> path shown
	unserved []derive.UnservedName            // what the last derivation handed the naming words' seam
}

// read parses one file as the folder feed does, but with every namespace
// and label, so that what the block's selection leaves out is said, not
// silently missing. It returns false when the file has errors.
func (l *lintBlockState) read(out *lintOut, dir, path string) bool {
	raw, err := os.ReadFile(path)
	if err != nil {
		out.error(path, 0, err.Error())
		return false
	}
	st, err := os.Stat(path)
	if err != nil {
		out.error(path, 0, err.Error())
		return false
	}
	open := *l.dc
	open.Namespaces, open.Selector = nil, nil
	p, _ := dirfeed.ParseFile(path, raw, st.ModTime(), &open)
	ok := true
	for _, pr := range p.Problems {
		if pr.UnknownKind {
			continue // a whole application's folder holds Deployments, ConfigMaps...
		}
		out.error(path, pr.Line, pr.Msg)
		ok = false
	}
	// Keys are made unique per file by its base name: here, per path.
	r, _ := filepath.Rel(dir, path)
	key := func(k string) string {
		return "file:" + r + strings.TrimPrefix(k, "file:"+filepath.Base(path))
	}
	cfg := l.cfg
	f := &dirfeed.ManifestFile{Mtime: st.ModTime(), Classes: p.Classes}
	for _, s := range p.Slices {
		if len(cfg.namespaces) == 0 || slices.Contains(cfg.namespaces, s.Namespace) {
			f.Slices = append(f.Slices, s)
		}
	}
	for _, g := range p.Gateways {
		if len(cfg.namespaces) == 0 || slices.Contains(cfg.namespaces, g.Namespace) {
			f.Gateways = append(f.Gateways, g)
		}
	}
	for _, doc := range p.Docs {
		o := doc.Obj
		lo := &lintObject{pos: fmt.Sprintf("%s:%d", path, doc.Line), kind: object.KindDNSEndpoint, namespace: o.Namespace, name: o.Name}
		l.objs = append(l.objs, lo)
		if why := lintSelected(cfg, o.Namespace, docLabels(doc.Text)); why != "" {
			lo.notes = append(lo.notes, lintNote{"", derive.EventNameSkipped, why, ""})
			continue
		}
		o.Key = key(o.Key)
		lo.obj = o
		for _, b := range doc.Bad {
			reason := derive.EventInvalidEndpoint
			if b.Reason == object.ReasonZone {
				reason = derive.EventNameSkipped
			}
			lo.notes = append(lo.notes, lintNote{"", reason, b.Msg, ""})
		}
	}
	for _, s := range p.Sources {
		s.Key = key(s.Key)
		if !cfg.serves(s.Kind) && !object.IsGslbKind(s.Kind) {
			if lintSelected(cfg, s.Namespace, lintLabels(s.Obj)) == "" {
				f.Sources = append(f.Sources, s) // read for the Gslbs that name it
			}
			continue
		}
		lo := &lintObject{pos: fmt.Sprintf("%s:%d", path, s.Line), kind: s.Kind, namespace: s.Namespace, name: s.Name}
		if why := lintSelected(cfg, s.Namespace, lintLabels(s.Obj)); why != "" {
			lo.notes = append(lo.notes, lintNote{"", derive.EventNameSkipped, why, ""})
			l.objs = append(l.objs, lo)
			continue
		}
		f.Sources = append(f.Sources, s)
	}
	l.files[r] = f
	l.rel[r] = path
	return ok
}

// derive derives the cluster's kinds of every file read, as the folder
// feed does, and notes what of each is not served and why.
func (l *lintBlockState) derive() {
	cfg, dc := l.cfg, l.dc
	w := dirfeed.NewDirWorld(l.files)
	for _, r := range dirfeed.SortedKeys(l.files) {
		f := l.files[r]
		for i := range f.Sources {
			s := &f.Sources[i]
			if !cfg.serves(s.Kind) && !object.IsGslbKind(s.Kind) {
				continue // read for the Gslbs that name it, serving nothing of its own
			}
			lo := &lintObject{pos: fmt.Sprintf("%s:%d", l.rel[r], s.Line), kind: s.Kind, namespace: s.Namespace, name: s.Name}
			noted := len(w.Noted)
			l.unserved = l.unserved[:0]
			decl := s.Derive(dc, w)
			for _, n := range w.Noted[noted:] {
				_, note, _ := strings.Cut(n, "\x00")
				lo.notes = append(lo.notes, lintNote{"", derive.EventReferenceRefused, note, ""})
			}
			if _, gslb := s.Obj.(*object.GslbObject); !gslb {
				for _, n := range derive.SkippedNames(s.Kind, s.Obj, decl, l.unserved, &dc.Options, w) {
					lo.notes = append(lo.notes, lintNote{name: n.Name, reason: derive.EventNameSkipped, msg: n.Msg, k8sGateway: n.K8sGateway})
				}
			}
			if decl == nil {
				if len(lo.notes) > 0 { // else it names no host (a ClusterIP Service): nothing to say
					l.objs = append(l.objs, lo)
				}
				continue
			}
			l.objs = append(l.objs, lo)
			o, bad := decl.Object(nil, cfg.Zones, cfg.ttl)
			o.Key = s.Key
			lo.obj = o
			for _, m := range decl.Bad {
				lo.notes = append(lo.notes, lintNote{"", derive.EventInvalidEndpoint, m, ""})
			}
			for _, x := range bad {
				if x.Reason != object.ReasonZone { // SkippedNames said it
					lo.notes = append(lo.notes, lintNote{"", derive.EventInvalidEndpoint, x.Msg, ""})
				}
			}
		}
	}
}

// report merges what was read as the server's builder would, prints each
// object with what it serves or why not, and the summary; it returns
// LintServed or LintNotServed.
func (l *lintBlockState) report(out *lintOut) int {
	var built []*object.Object
	for _, lo := range l.objs {
		if lo.obj != nil {
			built = append(built, lo.obj)
		}
	}
	snap, reports := lintMerge(l.cfg, built)

	slices.SortStableFunc(l.objs, func(x, y *lintObject) int { return lintComparePos(x.pos, y.pos) })
	code := LintServed
	served := 0
	for _, lo := range l.objs {
		var names []lintServes
		if lo.obj != nil {
			lo.notes = append(lo.notes, lintServed(lo.obj, reports[lo.obj], snap, &names)...)
		}
		served += len(names)
		if len(lo.notes) > 0 {
			code = LintNotServed
		}
		out.object(lo, names)
	}
	out.summary(len(l.objs), served, l.cfg.Zones)
	return code
}

// lintMerge is the lint's one seam with the builder: it merges objs as the
// server's builder does (tenancy, refusals) and returns the snapshot and,
// per object, what the builder reported of it (the Events it would write).
func lintMerge(cfg *config, objs []*object.Object) (*tree.Snapshot, map[*object.Object][]lintNote) {
	snap := &atomic.Pointer[tree.Snapshot]{}
	b := builder.New(cfg.buildConfig(), snap)
	reports := map[*object.Object][]lintNote{}
	b.SetReporter(func(o *object.Object, reason, message string) {
		reports[o] = append(reports[o], lintNote{"", reason, message, ""})
	})
	for _, o := range objs {
		b.Upsert(o)
	}
	b.Synced()
	b.Flush()
	return snap.Load(), reports
}

// lintSelected says why the block's namespaces and labels leave an object
// out ("" when they select it).
func lintSelected(cfg *config, ns string, labels map[string]string) string {
	if cfg.dirConfig().Selects(ns, labels) {
		return ""
	}
	if len(cfg.namespaces) > 0 && !slices.Contains(cfg.namespaces, ns) {
		return fmt.Sprintf("namespace %q is not one this block reads (namespaces %s)", ns, strings.Join(cfg.namespaces, " "))
	}
	return fmt.Sprintf("its labels do not match the block's labels %s", cfg.labels)
}

// lintLabels are the labels of a derived kind's object.
func lintLabels(obj any) map[string]string {
	if m, ok := obj.(interface{ GetLabels() map[string]string }); ok {
		return m.GetLabels()
	}
	return nil
}

// lintServed lists what o serves ("NAME TYPE TYPE", in canonical order)
// into names, and returns what the builder refused of it (its reports)
// and what of it the snapshot does not hold for another reason (a CNAME
// beside other data).
func lintServed(o *object.Object, reports []lintNote, snap *tree.Snapshot, names *[]lintServes) []lintNote {
	var notes []lintNote
	refused := map[string]bool{}  // name -> every type refused
	refusedT := map[string]bool{} // name + "/" + type -> refused
	for _, r := range reports {
		name, t := lintRefusedName(o, r.msg)
		switch {
		case name == "":
		case t != "":
			refusedT[name+"/"+t] = true
		default:
			refused[name] = true
		}
		notes = append(notes, lintNote{name, r.reason, r.msg, ""})
	}
	// The builder reports in the order it merged (and a name merged again
	// in a later round again): sorted and once each, for a stable output.
	slices.SortFunc(notes, func(x, y lintNote) int {
		return cmp.Or(cmp.Compare(x.name, y.name), cmp.Compare(x.reason, y.reason), cmp.Compare(x.msg, y.msg))
	})
	notes = slices.Compact(notes)
	var all []string
	for name := range o.Names {
		all = append(all, name)
	}
	tree.SortCanonical(all)
	for _, name := range all {
		if refused[name] {
			continue
		}
		node := snap.Get(name)
		var types []string
		for _, ep := range o.At(name) {
			t := dns.TypeToString[ep.Type]
			if slices.Contains(types, t) || refusedT[name+"/"+t] {
				continue
			}
			empty := len(ep.Addrs) == 0 && len(ep.RRs) == 0 // a pending load balancer: NODATA until it has an address
			if node == nil || !empty && !slices.ContainsFunc(node.RRsets, func(s tree.RRset) bool { return s.Type == ep.Type }) {
				if !slices.ContainsFunc(notes, func(n lintNote) bool { return n.name == name }) {
					msg := fmt.Sprintf("the %s at %s is not served", t, name)
					if ep.Type == dns.TypeCNAME {
						msg = fmt.Sprintf("CNAME at %s skipped: other data or another CNAME at the same name (RFC 1034 §3.6.2)", name)
					}
					notes = append(notes, lintNote{name, derive.EventNameRefused, msg, ""})
				}
				continue
			}
			if empty {
				t += " (no targets yet)"
			}
			types = append(types, t)
		}
		if len(types) > 0 {
			*names = append(*names, lintServes{name, types})
		}
	}
	return notes
}

// lintRefusedName finds the name (and, for an RRset refused alone, its
// type) that a refusal of o is about: the builder's messages name it
// first among o's names.
func lintRefusedName(o *object.Object, msg string) (name, typ string) {
	fields := strings.Fields(msg)
	for i, f := range fields {
		f = strings.TrimRight(f, ":,;()")
		if len(o.At(f)) == 0 {
			continue
		}
		switch {
		case i >= 3 && fields[i-1] == "at" && fields[i-2] == "RRset":
			// "the A RRset at NAME needs ...": one type refused as too large.
			return f, fields[i-3]
		case i >= 2 && fields[i-1] == "at" && fields[i-2] == "delegation":
			return f, "NS" // the delegation is refused, the name's other data stays
		}
		return f, ""
	}
	return "", ""
}

// lintComparePos orders "path:line" by path, then line as a number.
func lintComparePos(a, b string) int {
	ap, al := splitPos(a)
	bp, bl := splitPos(b)
	return cmp.Or(cmp.Compare(ap, bp), cmp.Compare(al, bl))
}

func splitPos(p string) (string, int) {
	i := strings.LastIndexByte(p, ':')
	n, _ := strconv.Atoi(p[i+1:])
	return p[:i], n
}

// docLabels reads metadata.labels of a manifest document's JSON.
func docLabels(text string) map[string]string {
	var m struct {
		Metadata struct {
			Labels map[string]string `json:"labels"`
		} `json:"metadata"`
	}
	_ = json.Unmarshal([]byte(text), &m)
	return m.Metadata.Labels
}

// lintOut writes the lint's lines, as text or as JSON Lines.
type lintOut struct {
	w    io.Writer
	json bool
}

func (o *lintOut) line(v any, text string) {
	if o.json {
		b, _ := json.Marshal(v)
		text = string(b)
	}
	fmt.Fprintln(o.w, text)
}

func (o *lintOut) error(file string, line int, msg string) {
	where := file
	if line > 0 {
		where = fmt.Sprintf("%s:%d", file, line)
	}
	text := msg
	if where != "" {
		text = where + ": " + msg
	}
	o.line(struct {
		File  string `json:"file,omitempty"`
		Line  int    `json:"line,omitempty"`
		Error string `json:"error"`
	}{file, line, msg}, text)
}

func (o *lintOut) block(where string, zones []string) {
	o.line(struct {
		Block string   `json:"block"`
		Zones []string `json:"zones"`
	}{where, zones}, fmt.Sprintf("# k8scrd at %s (%s)", where, strings.Join(zones, " ")))
}

func (o *lintOut) summary(objects, served int, zones []string) {
	o.line(struct {
		Objects int      `json:"objects"`
		Served  int      `json:"served"`
		Zones   []string `json:"zones"`
	}{objects, served, zones}, fmt.Sprintf("%d objects, %d names served in %s", objects, served, strings.Join(zones, " ")))
}

type lintServes struct {
	Name  string   `json:"name"`
	Types []string `json:"types"`
}

type lintNotServed struct {
	Name       string `json:"name,omitempty"`
	Reason     string `json:"reason"`
	Message    string `json:"message"`
	K8sGateway string `json:"k8sGateway,omitempty"`
}

// object writes an object's line and one line per thing of it not served
// (as text), or one JSON object with both.
func (o *lintOut) object(lo *lintObject, names []lintServes) {
	head := fmt.Sprintf("%s: %s %s/%s: ", lo.pos, lo.kind, lo.namespace, lo.name)
	if !o.json {
		what := "serves nothing"
		if len(names) > 0 {
			var s []string
			for _, n := range names {
				s = append(s, n.Name+" "+strings.Join(n.Types, " "))
			}
			what = "serves " + strings.Join(s, ", ")
		}
		fmt.Fprintln(o.w, head+what)
		for _, n := range lo.notes {
			fmt.Fprintln(o.w, head+n.reason+": "+n.msg)
		}
		return
	}
	file, line := splitPos(lo.pos)
	v := struct {
		File      string          `json:"file"`
		Line      int             `json:"line"`
		Kind      string          `json:"kind"`
		Namespace string          `json:"namespace"`
		Name      string          `json:"name"`
		Serves    []lintServes    `json:"serves"`
		NotServed []lintNotServed `json:"notServed"`
	}{File: file, Line: line, Kind: lo.kind, Namespace: lo.namespace, Name: lo.name, Serves: names, NotServed: []lintNotServed{}}
	if v.Serves == nil {
		v.Serves = []lintServes{}
	}
	for _, n := range lo.notes {
		v.NotServed = append(v.NotServed, lintNotServed{n.name, n.reason, n.msg, n.k8sGateway})
	}
	o.line(v, "")
}
