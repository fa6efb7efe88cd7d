package main

import (
	"fmt"
	"log"
	"os"
	"os/exec"
	"runtime"
	"strings"
	"time"

	"github.com/fleetdns/fleetdns/test/bench/benchkit"
)

// report prints the markdown tables and appends them to -out.
func report(root, bin string, groups []*group, took time.Duration) {
	var b strings.Builder
	host, _ := os.Hostname()
	fmt.Fprintf(&b, "\n### Instructions per query under callgrind (%s)\n\n", time.Now().UTC().Format("2006-01-02 15:04 MST"))
	fmt.Fprintf(&b, "Machine: %s, %d CPUs, %s; %s; coredns %s (%s, module at %s); load average at the end %s; the whole run took %v.\n\n",
		host, runtime.NumCPU(), firstLine("uname", "-sr"), firstLine("valgrind", "--version"), bin,
		strings.TrimPrefix(firstLine("go", "version", bin), bin+": "), firstLine("git", "-C", root, "describe", "--always", "--dirty"),
		benchkit.Loadavg(), took.Round(time.Second))
	fmt.Fprintf(&b, "Command: `go run ./test/bench/instr %s`\n\n", strings.Join(os.Args[1:], " "))
	settled := "each sent when every server thread was asleep"
	if !*flagSettle {
		settled = "each sent as soon as the previous reply arrived"
	}
	fmt.Fprintf(&b, "Servers under `%s` with GOMAXPROCS=%q GODEBUG=%q GOGC=%q; %d warm-up queries per row, then %d windows of %d queries each (%d client(s), one query outstanding each, %s, every reply checked); a garbage collection is forced through pprof before each window. Ir = instructions executed in user space by every thread of the server (Go runtime and GC included) while the window was open.\n\n",
		strings.Join(append([]string{"valgrind", "--tool=callgrind", "--instr-atstart=no"}, strings.Fields(*flagVGArgs)...), " "), *flagGOMAXPROCS, *flagGODEBUG, *flagGOGC, *flagWarm, *flagRuns, *flagQueries, *flagClients, settled)
	b.WriteString("| comparison | configuration | Ir/query, each window | spread | Ir/query over baseline | heap B/query | GCs per window | stack copies per query (their Ir), each window | window wall time |\n|---|---|---|---:|---|---:|---|---|---|\n")
	for _, g := range groups {
		by := map[string]*row{}
		for _, r := range g.rows {
			by[r.name] = r
		}
		for _, r := range g.rows {
			ratio := "(baseline)"
			if base, ok := by[r.baseline]; ok {
				ratio = fmt.Sprintf("**%.3f** (/ %s)", meanPerQuery(r)/meanPerQuery(base), base.name)
			}
			var irs, gcs, copies, walls []string
			lo, hi := 0.0, 0.0
			for i, w := range r.runs {
				v := w.perQuery()
				if i == 0 || v < lo {
					lo = v
				}
				if i == 0 || v > hi {
					hi = v
				}
				irs = append(irs, fmt.Sprintf("%.0f", v))
				gcs = append(gcs, fmt.Sprint(w.gcs))
				copies = append(copies, w.copiesPerQuery())
				walls = append(walls, fmt.Sprintf("%.1fs", w.elapsed.Seconds()))
			}
			var alloc, n int64
			for _, w := range r.runs {
				alloc += w.allocBytes
				n += int64(w.n)
			}
			fmt.Fprintf(&b, "| %s | %s | %s | %.2f%% | %s | %.0f | %s | %s | %s |\n", g.name, r.name, strings.Join(irs, ", "),
				100*(hi-lo)/max(lo, 1), ratio, float64(alloc)/float64(max(n, 1)), strings.Join(gcs, ", "), strings.Join(copies, ", "), strings.Join(walls, ", "))
		}
	}
	var moved []string
	for _, g := range groups {
		for _, r := range g.rows {
			if copiesMoved(r.runs) {
				moved = append(moved, r.name)
			}
		}
	}
	if len(moved) > 0 {
		fmt.Fprintf(&b, "\nThe stack copies per query differ between the windows of %s: the starting stack of new goroutines, which the runtime sets at every collection from the average stack in use, moved between them, and with it the Ir. To compare binaries whose goroutines differ, run both with `-godebug %s,adaptivestackstart=0` (test/bench/instr/README.md).\n",
			strings.Join(moved, "; "), *flagGODEBUG)
	}
	if *flagIdle > 0 {
		fmt.Fprintf(&b, "\nIdle windows (%v, no queries; the same steps otherwise): what the background of each server adds per second, and as a share of its measured windows (idle Ir/s x the window's wall time / the window's Ir).\n\n", *flagIdle)
		b.WriteString("| server | idle Ir/s, each window | share of its windows' Ir |\n|---|---|---|\n")
		for _, g := range groups {
			for _, s := range g.servers {
				var rates []string
				var rate float64
				for _, w := range g.idle[s] {
					r := float64(w.ir) / w.elapsed.Seconds()
					rate = max(rate, r)
					rates = append(rates, fmt.Sprintf("%.0f", r))
				}
				var shares []string
				for _, r := range g.rows {
					if r.srv != s {
						continue
					}
					for _, w := range r.runs {
						shares = append(shares, fmt.Sprintf("%.2f%%", 100*rate*w.elapsed.Seconds()/float64(max(w.ir, 1))))
					}
				}
				fmt.Fprintf(&b, "| %s | %s | at most %s |\n", s.name, strings.Join(rates, ", "), strings.Join(shares, ", "))
			}
		}
	}
	fmt.Print(b.String())
	if *flagOut != "" {
		f, err := os.OpenFile(*flagOut, os.O_APPEND|os.O_CREATE|os.O_WRONLY, 0o644)
		if err != nil {
			log.Fatal(err)
		}
		defer f.Close()
		f.WriteString(b.String())
	}
}

// copiesMoved reports whether the stack copies per query of a row's
// windows differ by more than a tenth of a copy: the starting stack moved.
func copiesMoved(runs []window) bool {
	lo, hi := 0.0, 0.0
	for i, w := range runs {
		if w.copies.n < 0 {
			return false
		}
		c := float64(w.copies.n) / float64(max(w.n, 1))
		if i == 0 || c < lo {
			lo = c
		}
		if i == 0 || c > hi {
			hi = c
		}
	}
	return hi-lo > 0.1
}

// meanPerQuery is Ir over queries across all of a row's windows.
func meanPerQuery(r *row) float64 {
	var ir, n int64
	for _, w := range r.runs {
		ir += w.ir
		n += int64(w.n)
	}
	return float64(ir) / float64(max(n, 1))
}

// firstLine is the first line of a command's output, "?" when it fails.
func firstLine(argv ...string) string {
	out, err := exec.Command(argv[0], argv[1:]...).Output()
	if err != nil {
		return "?"
	}
	l, _, _ := strings.Cut(strings.TrimSpace(string(out)), "\n")
	return l
}
