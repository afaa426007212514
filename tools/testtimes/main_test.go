package main

import (
	"fmt"
	"strings"
	"testing"
)

func TestReport(t *testing.T) {
	for _, tc := range []struct {
		name     string
		in       string
		ok       bool
		want     []string
		wantNone []string
	}{{
		name: "every test passes: one line each, no logs",
		in: `{"Action":"run","Package":"p","Test":"TestA"}
{"Action":"output","Package":"p","Test":"TestA","Output":"node log line\n"}
{"Action":"pass","Package":"p","Test":"TestA","Elapsed":41.25}
{"Action":"run","Package":"p","Test":"TestB/sub"}
{"Action":"pass","Package":"p","Test":"TestB/sub","Elapsed":2}
{"Action":"pass","Package":"p","Test":"TestB","Elapsed":3}
{"Action":"skip","Package":"p","Test":"TestC","Elapsed":0}
{"Action":"pass","Package":"p","Elapsed":44.5}
`,
		ok:       true,
		want:     []string{"--- PASS TestA (41.2s)", "--- PASS TestB (3s)", "--- SKIP TestC (0s)", "ok   p (44.5s)", "3 tests, 44.2s in all", "  TestA "},
		wantNone: []string{"node log line", "TestB/sub"},
	}, {
		name: "a failing test prints its output",
		in: `{"Action":"output","Package":"p","Test":"TestA","Output":"cluster_e2e_test.go:70: round 1 never closed\n"}
{"Action":"fail","Package":"p","Test":"TestA","Elapsed":90}
{"Action":"fail","Package":"p","Elapsed":91}
`,
		want: []string{"--- FAIL TestA (1m30s)", "    cluster_e2e_test.go:70: round 1 never closed", "FAIL p (1m31s)"},
	}, {
		name: "a timeout outside any test prints the package's output",
		in: `{"Action":"pass","Package":"p","Test":"TestA","Elapsed":1}
{"Action":"output","Package":"p","Output":"panic: test timed out after 45m0s\n"}
{"Action":"fail","Package":"p","Elapsed":2700}
`,
		want: []string{"FAIL p (45m0s)", "panic: test timed out after 45m0s"},
	}, {
		name: "a package that does not build",
		in: `{"ImportPath":"p","Action":"build-output","Output":"x.go:1: undefined: y\n"}
{"ImportPath":"p","Action":"build-fail"}
`,
		want: []string{"FAIL p (does not build)"},
	}, {
		name: "no package at all is not a pass",
		in:   "go: cannot find main module\n",
		want: []string{"go: cannot find main module", "0 tests"},
	}} {
		t.Run(tc.name, func(t *testing.T) {
			var out strings.Builder
			ok, err := report(strings.NewReader(tc.in), &out)
			if err != nil {
				t.Fatal(err)
			}
			if ok != tc.ok {
				t.Errorf("ok = %v, want %v; output:\n%s", ok, tc.ok, out.String())
			}
			for _, w := range tc.want {
				if !strings.Contains(out.String(), w) {
					t.Errorf("output lacks %q:\n%s", w, out.String())
				}
			}
			for _, w := range tc.wantNone {
				if strings.Contains(out.String(), w) {
					t.Errorf("output has %q:\n%s", w, out.String())
				}
			}
		})
	}
}

// TestReportEndsWithTheFailuresOwnMessages: after the time table comes one entry per
// failed test (subtests too; a parent that wrote nothing itself is left out) with only
// the lines its own t.Error/t.Fatal/t.Log calls wrote, not the sidecar logs around them
// nor a multi-line message's later lines, at most maxMessages of them and a count of
// the rest.
func TestReportEndsWithTheFailuresOwnMessages(t *testing.T) {
	var in strings.Builder
	ev := func(action, test, output string) {
		fmt.Fprintf(&in, `{"Action":%q,"Package":"p","Test":%q,"Output":%q,"Elapsed":1}`+"\n", action, test, output)
	}
	ev("output", "TestCheat", "=== RUN   TestCheat\n")
	for i := range 3000 {
		ev("output", "TestCheat", fmt.Sprintf("w1: 2026-12-02T11:00:00Z INF round %d committed\n", i))
		if i == 1500 {
			ev("output", "TestCheat", "    rounds_cheat_e2e_test.go:102: the prover's reward 0udepin, want 5udepin\n")
			ev("output", "TestCheat", "    cluster_e2e_test.go:80: w1's log tail:\n        w1: tail line\n")
		}
	}
	ev("fail", "TestCheat", "")
	for i := range maxMessages + 3 {
		ev("output", "TestLoop/sub", fmt.Sprintf("        loop_test.go:%d: attempt %d\n", 10+i, i))
	}
	ev("fail", "TestLoop/sub", "")
	ev("fail", "TestLoop", "")
	ev("pass", "TestOK", "")
	ev("fail", "", "")

	var out strings.Builder
	ok, err := report(strings.NewReader(in.String()), &out)
	if err != nil || ok {
		t.Fatalf("report = %v, %v; want a failure", ok, err)
	}
	table := strings.LastIndex(out.String(), "3 tests, ")
	if table < 0 {
		t.Fatalf("no time table:\n%s", out.String())
	}
	want := `2 failed:
--- FAIL TestCheat
    rounds_cheat_e2e_test.go:102: the prover's reward 0udepin, want 5udepin
    cluster_e2e_test.go:80: w1's log tail:
--- FAIL TestLoop/sub
    loop_test.go:10: attempt 0
`
	end := out.String()[table:]
	if i := strings.Index(end, "2 failed:"); i < 0 || !strings.HasPrefix(end[i:], want) {
		t.Fatalf("after the time table:\n%s\nwant it to end with a section starting:\n%s", end, want)
	}
	if !strings.HasSuffix(end, fmt.Sprintf("    loop_test.go:%d: attempt %d\n    (3 more lines from _test.go files above)\n", 10+maxMessages-1, maxMessages-1)) {
		t.Fatalf("the failures section does not end with TestLoop/sub's last %d messages and the count of the rest:\n%s", maxMessages, end)
	}
	if strings.Contains(end, "INF round") || strings.Contains(end, "tail line") {
		t.Fatalf("the failures section holds sidecar log lines:\n%s", end)
	}
}
