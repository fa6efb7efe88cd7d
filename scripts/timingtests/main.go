// Command timingtests prints the -run pattern of `make timing`: every test
// function under the given folders whose body reads testkit.Race. A test
// that bounds a latency reads it to relax the bound under the race detector,
// so the list follows the tests: a renamed or new one is in it, and a
// folder with none is an error, never an empty run.
//
//	go run ./scripts/timingtests plugin internal   # ^(TestA|TestB|...)$
package main

import (
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
)

func main() {
	if len(os.Args) < 2 {
		fmt.Fprintln(os.Stderr, "usage: timingtests DIR...")
		os.Exit(2)
	}
	var names []string
	for _, dir := range os.Args[1:] {
		found, err := timingTests(dir)
		if err != nil {
			fmt.Fprintln(os.Stderr, "timingtests:", err)
			os.Exit(1)
		}
		names = append(names, found...)
	}
	if len(names) == 0 {
		fmt.Fprintf(os.Stderr, "timingtests: no test under %s reads testkit.Race: nothing would run\n", strings.Join(os.Args[1:], " "))
		os.Exit(1)
	}
	slices.Sort(names)
	fmt.Printf("^(%s)$\n", strings.Join(slices.Compact(names), "|"))
}

// timingTests returns the Test functions of the _test.go files under dir
// whose body mentions testkit.Race.
func timingTests(dir string) ([]string, error) {
	var names []string
	fset := token.NewFileSet()
	err := filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() || !strings.HasSuffix(path, "_test.go") {
			return err
		}
		f, err := parser.ParseFile(fset, path, nil, 0)
		if err != nil {
			return err
		}
		for _, decl := range f.Decls {
			fn, ok := decl.(*ast.FuncDecl)
			if !ok || fn.Recv != nil || fn.Body == nil || !strings.HasPrefix(fn.Name.Name, "Test") {
				continue
			}
			if readsRace(fn.Body) {
				names = append(names, fn.Name.Name)
			}
		}
		return nil
	})
	return names, err
}

// readsRace reports whether n mentions testkit.Race.
func readsRace(n ast.Node) bool {
	found := false
	ast.Inspect(n, func(n ast.Node) bool {
		if sel, ok := n.(*ast.SelectorExpr); ok && sel.Sel.Name == "Race" {
			if id, ok := sel.X.(*ast.Ident); ok && id.Name == "testkit" {
				found = true
			}
		}
		return !found
	})
	return found
}
