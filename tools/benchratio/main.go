// Command benchratio reads `go test -bench` output and reports every sub-benchmark as a
// ratio against the first sub-benchmark of its family, measured in the same run (the
// fastest of repeated runs of each). Speed
// targets are stated as such ratios (e.g. EndBlocker at 10,000 open jobs vs at 100) so
// they hold on any machine.
package main

import (
	"bufio"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
)

type result struct {
	name    string
	nsPerOp float64
	extra   []string
}

// keepFastest records a result, keeping only the fastest of repeated runs (-count): the
// minimum is the least disturbed by other load on the machine.
func keepFastest(rs []result, r result) []result {
	for i := range rs {
		if rs[i].name == r.name {
			if r.nsPerOp < rs[i].nsPerOp {
				rs[i] = r
			}
			return rs
		}
	}
	return append(rs, r)
}

func main() {
	in := io.Reader(os.Stdin)
	if len(os.Args) > 1 {
		f, err := os.Open(os.Args[1])
		if err != nil {
			fmt.Fprintln(os.Stderr, "benchratio:", err)
			os.Exit(1)
		}
		defer f.Close()
		in = f
	}
	families := map[string][]result{}
	var order []string
	sc := bufio.NewScanner(in)
	for sc.Scan() {
		fields := strings.Fields(sc.Text())
		if len(fields) < 4 || !strings.HasPrefix(fields[0], "Benchmark") || fields[3] != "ns/op" {
			continue
		}
		ns, err := strconv.ParseFloat(fields[2], 64)
		if err != nil {
			continue
		}
		name := fields[0]
		if i := strings.LastIndex(name, "-"); i > 0 {
			name = name[:i] // drop the GOMAXPROCS suffix
		}
		family, _, _ := strings.Cut(name, "/")
		if _, seen := families[family]; !seen {
			order = append(order, family)
		}
		families[family] = keepFastest(families[family], result{name: name, nsPerOp: ns, extra: fields[4:]})
	}
	for _, family := range order {
		rs := families[family]
		base := rs[0]
		fmt.Printf("%s (baseline %s)\n", family, base.name)
		for _, r := range rs {
			fmt.Printf("  %-60s %14.0f ns/op  ratio %6.2f  %s\n", r.name, r.nsPerOp, r.nsPerOp/base.nsPerOp, strings.Join(r.extra, " "))
		}
	}
}
