package main

import (
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
