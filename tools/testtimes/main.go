// Command testtimes reads `go test -json` on standard input and prints one line per
// top-level test with its result and time, the whole output of every test that failed
// (and of a package that failed outside any test: a panic, a timeout, a build error),
// and the slowest tests at the end. It exits 1 unless every package passed.
//
// It exists for the sidecars' end-to-end package (`make test-e2e`): run with -v, that
// package prints every node's and sidecar's log — megabytes — and without -v it prints
// nothing but "ok", so nobody can see which tests eat CI's time budget.
package main

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"sort"
	"strings"
	"time"
)

// event is one line of `go test -json` (cmd/test2json).
type event struct {
	Action     string
	Package    string
	ImportPath string // build-output and build-fail events
	Test       string
	Elapsed    float64
	Output     string
}

type finished struct {
	name    string
	elapsed float64
}

func main() {
	ok, err := report(os.Stdin, os.Stdout)
	if err != nil {
		fmt.Fprintln(os.Stderr, "testtimes:", err)
		os.Exit(1)
	}
	if !ok {
		os.Exit(1)
	}
}

// report copies the summary of the event stream in to out and says whether every
// package seen passed (and at least one was seen).
func report(in io.Reader, out io.Writer) (bool, error) {
	outputs := map[string]*strings.Builder{} // by package + "\x00" + test ("" for the package)
	var tests []finished
	passed, failed := 0, 0
	sc := bufio.NewScanner(in)
	sc.Buffer(make([]byte, 1<<20), 1<<26)
	for sc.Scan() {
		line := sc.Bytes()
		var ev event
		if err := json.Unmarshal(line, &ev); err != nil || ev.Action == "" {
			// go test prints some failures (a package that does not build) as plain text.
			fmt.Fprintf(out, "%s\n", line)
			continue
		}
		pkg := ev.Package
		if pkg == "" {
			pkg = ev.ImportPath
		}
		key := pkg + "\x00" + ev.Test
		switch ev.Action {
		case "output", "build-output":
			b := outputs[key]
			if b == nil {
				b = &strings.Builder{}
				outputs[key] = b
			}
			b.WriteString(ev.Output)
		case "build-fail":
			failed++
			fmt.Fprintf(out, "FAIL %s (does not build)\n", pkg)
		case "pass", "fail", "skip":
			if ev.Test == "" {
				if ev.Action == "fail" {
					failed++
					fmt.Fprintf(out, "FAIL %s (%s)\n", pkg, seconds(ev.Elapsed))
					if b := outputs[key]; b != nil {
						fmt.Fprint(out, indent(b.String()))
					}
				} else {
					passed++
					fmt.Fprintf(out, "ok   %s (%s)\n", pkg, seconds(ev.Elapsed))
				}
				continue
			}
			top := !strings.Contains(ev.Test, "/")
			if top {
				tests = append(tests, finished{ev.Test, ev.Elapsed})
			}
			if ev.Action == "fail" {
				fmt.Fprintf(out, "--- FAIL %s (%s)\n", ev.Test, seconds(ev.Elapsed))
				if b := outputs[key]; b != nil && top {
					fmt.Fprint(out, indent(b.String()))
				}
			} else if top {
				fmt.Fprintf(out, "--- %s %s (%s)\n", strings.ToUpper(ev.Action), ev.Test, seconds(ev.Elapsed))
			}
			delete(outputs, key)
		}
	}
	if err := sc.Err(); err != nil {
		return false, err
	}
	sort.Slice(tests, func(i, j int) bool { return tests[i].elapsed > tests[j].elapsed })
	var total float64
	for _, t := range tests {
		total += t.elapsed
	}
	fmt.Fprintf(out, "%d tests, %s in all\n", len(tests), seconds(total))
	for _, t := range tests[:min(len(tests), 5)] {
		fmt.Fprintf(out, "  %-60s %s\n", t.name, seconds(t.elapsed))
	}
	return failed == 0 && passed > 0, nil
}

func seconds(s float64) string {
	return (time.Duration(s*10) * time.Second / 10).String()
}

func indent(s string) string {
	return "    " + strings.ReplaceAll(strings.TrimRight(s, "\n"), "\n", "\n    ") + "\n"
}
