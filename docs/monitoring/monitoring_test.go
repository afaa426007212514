// Package monitoring_test checks the operator's monitoring files beside it:
// the alerting rules with promtool (each alert fires when it should and
// stays quiet otherwise: alerts_test.yml), and that every expression of the
// rules and the Grafana dashboard names only metrics that exist (the
// sidecar's, from a live registry, and the node's, node-metrics.txt, which
// cmd/depinchaind's TestRESTAndNodeMetrics checks against a real node).
package monitoring_test

import (
	"bytes"
	"encoding/json"
	"os"
	"os/exec"
	"regexp"
	"slices"
	"sort"
	"strings"
	"testing"

	"sigs.k8s.io/yaml"

	"github.com/depinchain/depinchain/provider/gpu"
	"github.com/depinchain/depinchain/provider/metrics"
)

// promtool finds promtool, failing loudly when it is missing: these tests
// must not pass by skipping.
func promtool(t *testing.T) string {
	t.Helper()
	path, err := exec.LookPath("promtool")
	if err != nil {
		t.Fatalf("promtool not found (%v): it comes with Debian's prometheus package; run `make deps` (scripts/deps.sh installs it)", err)
	}
	return path
}

func runPromtool(t *testing.T, args ...string) string {
	t.Helper()
	cmd := exec.Command(promtool(t), args...)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Run(); err != nil {
		t.Fatalf("promtool %s: %v\n%s", strings.Join(args, " "), err, out.String())
	}
	return out.String()
}

type ruleFile struct {
	Groups []struct {
		Name  string `json:"name"`
		Rules []struct {
			Alert       string            `json:"alert"`
			Expr        string            `json:"expr"`
			Labels      map[string]string `json:"labels"`
			Annotations map[string]string `json:"annotations"`
		} `json:"rules"`
	} `json:"groups"`
}

type ruleTests struct {
	Tests []struct {
		Name          string `json:"name"`
		AlertRuleTest []struct {
			AlertName string `json:"alertname"`
			ExpAlerts []any  `json:"exp_alerts"`
		} `json:"alert_rule_test"`
	} `json:"tests"`
}

func readYAML(t *testing.T, path string, out any) {
	t.Helper()
	raw, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if err := yaml.Unmarshal(raw, out); err != nil {
		t.Fatalf("%s: %v", path, err)
	}
}

// TestAlertRules runs promtool's checks and unit tests of the rules, and
// makes sure every alert is tested both firing and quiet, has a severity,
// and a runbook section in README.md.
func TestAlertRules(t *testing.T) {
	out := runPromtool(t, "check", "rules", "alerts.yml")
	t.Log(strings.TrimSpace(out))
	out = runPromtool(t, "test", "rules", "alerts_test.yml")
	if !strings.Contains(out, "SUCCESS") {
		t.Fatalf("promtool test rules: %s", out)
	}

	var rules ruleFile
	readYAML(t, "alerts.yml", &rules)
	var tests ruleTests
	readYAML(t, "alerts_test.yml", &tests)
	fires, quiet := map[string]bool{}, map[string]bool{}
	for _, tc := range tests.Tests {
		for _, at := range tc.AlertRuleTest {
			if len(at.ExpAlerts) > 0 {
				fires[at.AlertName] = true
			} else {
				quiet[at.AlertName] = true
			}
		}
	}
	readme, err := os.ReadFile("README.md")
	if err != nil {
		t.Fatal(err)
	}
	alerts := 0
	for _, g := range rules.Groups {
		for _, r := range g.Rules {
			if r.Alert == "" {
				continue
			}
			alerts++
			if !fires[r.Alert] || !quiet[r.Alert] {
				t.Errorf("%s: alerts_test.yml must show it firing (%v) and quiet (%v)", r.Alert, fires[r.Alert], quiet[r.Alert])
			}
			if s := r.Labels["severity"]; s != "critical" && s != "warning" {
				t.Errorf("%s: severity %q, want critical or warning", r.Alert, s)
			}
			anchor := "docs/monitoring/README.md#" + strings.ToLower(r.Alert)
			if r.Annotations["runbook"] != anchor || r.Annotations["summary"] == "" {
				t.Errorf("%s: annotations %v, want a summary and runbook %s", r.Alert, r.Annotations, anchor)
			}
			if !bytes.Contains(readme, []byte("\n### "+r.Alert+"\n")) {
				t.Errorf("%s: README.md has no section \"### %s\"", r.Alert, r.Alert)
			}
		}
	}
	if alerts == 0 {
		t.Fatal("alerts.yml has no alerts")
	}
}

// knownMetrics are the metric names an expression may use: everything a
// sidecar's registry exports (with every optional part registered and one
// GPU observed), every name node-metrics.txt lists, and Prometheus's own up.
func knownMetrics(t *testing.T) map[string]bool {
	t.Helper()
	m := metrics.New("h")
	m.RegisterStorage(func() metrics.StorageTotals { return metrics.StorageTotals{} })
	m.ObserveGPUs([]gpu.GPU{{Index: 0, UUID: "GPU-a", Name: "NVIDIA H100 80GB HBM3", MemoryMiB: 81559}}, nil, nil)
	// Series that exist only once something happened.
	m.SetTrainingStep(1, 1)
	m.SetCheckpointDeadline(1, 100)
	m.SetBond(1, 0, 1)
	m.Transaction("/x", true)
	m.DisputeMove("defender", 1)
	m.Verification("matched")
	families, err := m.Registry().Gather()
	if err != nil {
		t.Fatal(err)
	}
	known := map[string]bool{"up": true}
	for _, f := range families {
		name := f.GetName()
		known[name] = true
		switch f.GetType().String() {
		case "HISTOGRAM":
			known[name+"_bucket"], known[name+"_sum"], known[name+"_count"] = true, true, true
		case "SUMMARY":
			known[name+"_sum"], known[name+"_count"] = true, true
		}
	}
	raw, err := os.ReadFile("node-metrics.txt")
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(string(raw), "\n") {
		if line = strings.TrimSpace(line); line != "" && !strings.HasPrefix(line, "#") {
			known[line] = true
		}
	}
	return known
}

var (
	stringLit   = regexp.MustCompile(`"(\\.|[^"\\])*"|'(\\.|[^'\\])*'`)
	matchers    = regexp.MustCompile(`\{[^}]*\}`)
	ranges      = regexp.MustCompile(`\[[^\]]*\]`)
	grouping    = regexp.MustCompile(`\b(by|without|on|ignoring|group_left|group_right)\s*\([^)]*\)`)
	offset      = regexp.MustCompile(`\boffset\s+\S+`)
	identifier  = regexp.MustCompile(`[A-Za-z_:][A-Za-z0-9_:]*`)
	labelValues = regexp.MustCompile(`^\s*label_values\(\s*([A-Za-z_:][A-Za-z0-9_:]*)\s*,`)
	keywords    = []string{"and", "or", "unless", "by", "without", "on", "ignoring", "group_left", "group_right", "offset", "bool", "inf", "nan", "Inf", "NaN"}
)

// metricNames returns the metric names a PromQL expression (or a Grafana
// label_values(metric, label) query) reads: identifiers outside strings,
// label matchers, ranges and grouping clauses that are not functions,
// keywords, numbers or Grafana variables.
func metricNames(expr string) []string {
	if m := labelValues.FindStringSubmatch(expr); m != nil {
		return []string{m[1]}
	}
	e := stringLit.ReplaceAllString(expr, `""`)
	e = matchers.ReplaceAllString(e, " ")
	e = ranges.ReplaceAllString(e, " ")
	e = grouping.ReplaceAllString(e, " ")
	e = offset.ReplaceAllString(e, " ")
	var names []string
	for _, loc := range identifier.FindAllStringIndex(e, -1) {
		word := e[loc[0]:loc[1]]
		if slices.Contains(keywords, word) {
			continue
		}
		if loc[0] > 0 && strings.ContainsAny(e[loc[0]-1:loc[0]], "$0123456789.") {
			continue // a Grafana variable, or the exponent of a number
		}
		if rest := strings.TrimLeft(e[loc[1]:], " \t\n"); strings.HasPrefix(rest, "(") {
			continue // a function or aggregation
		}
		names = append(names, word)
	}
	return names
}

func TestMetricNames(t *testing.T) {
	for _, c := range []struct {
		expr string
		want []string
	}{
		{`sum by (result) (increase(depinprovider_bids_total{instance=~"$provider"}[$__rate_interval]))`, []string{"depinprovider_bids_total"}},
		{`a - ignoring (lease) group_left b < 100`, []string{"a", "b"}},
		{`count by (instance, job) (x) < count by (instance, job) (x offset 1h)`, []string{"x", "x"}},
		{`histogram_quantile(0.9, sum by (le) (rate(h_bucket[5m]))) > 1e3`, []string{"h_bucket"}},
		{`x{a="b(c)"} or vector(0)`, []string{"x"}},
		{`label_values(depinprovider_cursor_height, instance)`, []string{"depinprovider_cursor_height"}},
	} {
		if got := metricNames(c.expr); !slices.Equal(got, c.want) {
			t.Errorf("metricNames(%q) = %v, want %v", c.expr, got, c.want)
		}
	}
}

// checkNames reports the metrics an expression names that do not exist.
func checkNames(t *testing.T, known map[string]bool, where, expr string) {
	t.Helper()
	names := metricNames(expr)
	if len(names) == 0 {
		t.Errorf("%s: no metric in %q", where, expr)
	}
	for _, n := range names {
		if !known[n] {
			t.Errorf("%s: %q names %s, which neither the sidecar nor node-metrics.txt has", where, expr, n)
		}
	}
}

func TestAlertExpressionsNameExistingMetrics(t *testing.T) {
	known := knownMetrics(t)
	var rules ruleFile
	readYAML(t, "alerts.yml", &rules)
	for _, g := range rules.Groups {
		for _, r := range g.Rules {
			checkNames(t, known, "alerts.yml "+r.Alert, r.Expr)
		}
	}
}

type dashboard struct {
	Title      string `json:"title"`
	UID        string `json:"uid"`
	Templating struct {
		List []struct {
			Name  string          `json:"name"`
			Type  string          `json:"type"`
			Query json.RawMessage `json:"query"`
		} `json:"list"`
	} `json:"templating"`
	Panels []struct {
		ID         int    `json:"id"`
		Type       string `json:"type"`
		Title      string `json:"title"`
		Datasource *struct {
			Type string `json:"type"`
			UID  string `json:"uid"`
		} `json:"datasource"`
		GridPos struct{ H, W, X, Y int } `json:"gridPos"`
		Targets []struct {
			Expr string `json:"expr"`
		} `json:"targets"`
	} `json:"panels"`
}

// TestDashboard checks the Grafana dashboard: it parses, every panel reads
// the dashboard's Prometheus data source with at least one expression, no
// two panels share an id or overlap, and every expression and variable
// query names metrics that exist.
func TestDashboard(t *testing.T) {
	raw, err := os.ReadFile("dashboard.json")
	if err != nil {
		t.Fatal(err)
	}
	var d dashboard
	dec := json.NewDecoder(bytes.NewReader(raw))
	if err := dec.Decode(&d); err != nil {
		t.Fatalf("dashboard.json: %v", err)
	}
	if d.Title == "" || d.UID == "" || len(d.Panels) == 0 {
		t.Fatalf("dashboard.json: title %q, uid %q, %d panels", d.Title, d.UID, len(d.Panels))
	}
	known := knownMetrics(t)
	vars := map[string]bool{}
	for _, v := range d.Templating.List {
		vars[v.Name] = true
		if v.Type != "query" {
			continue
		}
		var q struct {
			Query string `json:"query"`
		}
		if err := json.Unmarshal(v.Query, &q); err != nil {
			t.Fatalf("variable %s: %v", v.Name, err)
		}
		checkNames(t, known, "variable "+v.Name, q.Query)
	}
	if !vars["datasource"] {
		t.Fatal("no datasource variable: the dashboard would not import onto another Prometheus")
	}
	ids := map[int]string{}
	type cell struct{ x, y int }
	taken := map[cell]string{}
	for _, p := range d.Panels {
		if prev, dup := ids[p.ID]; dup {
			t.Errorf("panels %q and %q share id %d", prev, p.Title, p.ID)
		}
		ids[p.ID] = p.Title
		if p.GridPos.W <= 0 || p.GridPos.H <= 0 || p.GridPos.X+p.GridPos.W > 24 {
			t.Errorf("panel %q: gridPos %+v", p.Title, p.GridPos)
		}
		for x := p.GridPos.X; x < p.GridPos.X+p.GridPos.W; x++ {
			for y := p.GridPos.Y; y < p.GridPos.Y+p.GridPos.H; y++ {
				if other, ok := taken[cell{x, y}]; ok {
					t.Fatalf("panels %q and %q overlap at %d,%d", other, p.Title, x, y)
				}
				taken[cell{x, y}] = p.Title
			}
		}
		if p.Type == "row" {
			continue
		}
		if p.Datasource == nil || p.Datasource.Type != "prometheus" || p.Datasource.UID != "${datasource}" {
			t.Errorf("panel %q: data source %+v, want the dashboard's ${datasource}", p.Title, p.Datasource)
		}
		if len(p.Targets) == 0 {
			t.Errorf("panel %q has no expression", p.Title)
		}
		for _, tg := range p.Targets {
			checkNames(t, known, "panel "+p.Title, tg.Expr)
		}
	}
}

// TestDashboardCoversTheSidecar: every depinprovider_* and DCGM metric the
// sidecar exports is on the dashboard, so a new metric is not forgotten.
func TestDashboardCoversTheSidecar(t *testing.T) {
	raw, err := os.ReadFile("dashboard.json")
	if err != nil {
		t.Fatal(err)
	}
	var d dashboard
	if err := json.Unmarshal(raw, &d); err != nil {
		t.Fatal(err)
	}
	used := map[string]bool{}
	for _, p := range d.Panels {
		for _, tg := range p.Targets {
			for _, n := range metricNames(tg.Expr) {
				used[strings.TrimSuffix(n, "_bucket")] = true
			}
		}
	}
	var missing []string
	for name := range knownMetrics(t) {
		if (strings.HasPrefix(name, "depinprovider_") || strings.HasPrefix(name, "DCGM_")) &&
			!strings.HasSuffix(name, "_sum") && !strings.HasSuffix(name, "_count") && !strings.HasSuffix(name, "_bucket") && !used[name] {
			missing = append(missing, name)
		}
	}
	sort.Strings(missing)
	if len(missing) > 0 {
		t.Errorf("sidecar metrics on no dashboard panel: %v", missing)
	}
}
