// Command testtimes reads `go test -json` on standard input and prints one line per
// top-level test with its result and time, the whole output of every test that failed
// (and of a package that failed outside any test: a panic, a timeout, a build error),
// the slowest tests, and last a short list of the failed tests with their own messages
// (the t.Error and t.Fatal lines, "name_test.go:NN: ..."): CI shows only the tail of a
// log in which those lines sit above thousands of lines of node and sidecar logs. It
// exits 1 unless every package passed.
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
	"regexp"
	"slices"
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

// failure is a failed test and the lines of its output that the test itself wrote.
type failure struct {
	name     string
	messages []string
	// more is how many more such lines there were than messages holds.
	more int
}

// maxMessages caps the messages listed per failed test: a test that logs in a loop
// should not push the others' off the end of the log.
const maxMessages = 10

// ownMessage matches a line the testing package prefixes with the file and line of the
// t.Log, t.Error or t.Fatal call in a _test.go file (a multi-line message's later lines
// are not listed: they are where cluster helpers put whole log tails).
var ownMessage = regexp.MustCompile(`^\s*[\w.-]+_test\.go:\d+: `)

// ownMessages returns the lines of output that match ownMessage, trimmed, at most
// maxMessages of them, and how many more matched.
func ownMessages(output string) (messages []string, more int) {
	for line := range strings.Lines(output) {
		if !ownMessage.MatchString(line) {
			continue
		}
		if len(messages) == maxMessages {
			more++
			continue
		}
		messages = append(messages, strings.TrimSpace(line))
	}
	return messages, more
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
	var failures []failure
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
				f := failure{name: ev.Test}
				if b := outputs[key]; b != nil {
					if top {
						fmt.Fprint(out, indent(b.String()))
					}
					f.messages, f.more = ownMessages(b.String())
				}
				failures = append(failures, f)
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
	failures = slices.DeleteFunc(failures, failedOnlyThroughSubtests(failures))
	if len(failures) > 0 {
		fmt.Fprintf(out, "%d failed:\n", len(failures))
		for _, f := range failures {
			fmt.Fprintf(out, "--- FAIL %s\n", f.name)
			for _, m := range f.messages {
				fmt.Fprintf(out, "    %s\n", m)
			}
			if f.more > 0 {
				fmt.Fprintf(out, "    (%d more lines from _test.go files above)\n", f.more)
			}
		}
	}
	return failed == 0 && passed > 0, nil
}

// failedOnlyThroughSubtests reports whether a failure says nothing but that a listed
// subtest of it failed: it wrote no message of its own.
func failedOnlyThroughSubtests(failures []failure) func(failure) bool {
	return func(f failure) bool {
		return len(f.messages) == 0 && slices.ContainsFunc(failures, func(sub failure) bool {
			return strings.HasPrefix(sub.name, f.name+"/")
		})
	}
}

func seconds(s float64) string {
	return (time.Duration(s*10) * time.Second / 10).String()
}

func indent(s string) string {
	return "    " + strings.ReplaceAll(strings.TrimRight(s, "\n"), "\n", "\n    ") + "\n"
}
