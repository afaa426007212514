package main_test

import (
	"bufio"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/depinchain/depinchain/testutil/localnet"
)

// nodeMetricsFile lists the metric names a node serves that the monitoring
// files (docs/monitoring) may use; docs/monitoring's tests check every
// expression against it, and TestRESTAndNodeMetrics checks it against a
// real node.
const nodeMetricsFile = "../../docs/monitoring/node-metrics.txt"

// TestRESTAndNodeMetrics starts two validators (so that peer metrics exist)
// with Prometheus and telemetry on, as docs/monitoring tells an operator to,
// and checks what web clients
// and Prometheus read from it: list filters take enum names as well as
// numbers, and every node metric the dashboard and alerts use is served.
func TestRESTAndNodeMetrics(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a real node")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	net := startNetwork(t, ctx, localnet.NetworkOptions{
		Validators: 2, Telemetry: true,
		Accounts: map[string]int64{"owner": 1_000_000_000_000, "provider": 1_000_000_000_000},
	})
	v := net.Validators[0]
	t.Run("enum filters", func(t *testing.T) { testRESTEnumFilters(t, ctx, v.Node) })
	t.Run("node metrics", func(t *testing.T) { testNodeMetrics(t, ctx, v) })
}

// restGet is a GET on the node's REST server that returns any status.
func restGet(t *testing.T, ctx context.Context, n *localnet.Node, path string) (int, string) {
	t.Helper()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, n.API+path, nil)
	if err != nil {
		t.Fatal(err)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("GET %s: %v", path, err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatalf("GET %s: %v", path, err)
	}
	return resp.StatusCode, string(body)
}

func testRESTEnumFilters(t *testing.T, ctx context.Context, n *localnet.Node) {
	mustTx(t, ctx, n, "provider", "stakingext", "register-provider", "gpu-farm-1", "https://gpu1.example.com:8443", "eu-west",
		"100000000000udepin", "--gpus", `{"model":"H100-SXM5-80GB","vram_mib":81920,"count":8}`)
	// Job 1 stays open (a bidding window far longer than the test), job 2 is cancelled.
	specPath := filepath.Join(t.TempDir(), "job.yaml")
	spec := strings.Replace(jobSpecYAML, "bidding_window_blocks: 60", "bidding_window_blocks: 10000", 1)
	if err := os.WriteFile(specPath, []byte(spec), 0o644); err != nil {
		t.Fatal(err)
	}
	for range 2 {
		mustTx(t, ctx, n, "owner", "market", "submit-job", "--spec", specPath, "--deposit", "50000000udepin")
	}
	mustTx(t, ctx, n, "owner", "market", "cancel-job", "2")

	ids := func(body, list, key string) []string {
		var out map[string]json.RawMessage
		if err := json.Unmarshal([]byte(body), &out); err != nil {
			t.Fatalf("%s: %v", body, err)
		}
		var items []map[string]any
		if err := json.Unmarshal(out[list], &items); err != nil {
			t.Fatalf("%s: %v", body, err)
		}
		var got []string
		for _, it := range items {
			s, _ := it[key].(string)
			got = append(got, s)
		}
		return got
	}
	provider := mustAddr(t, ctx, n, "provider")
	for _, c := range []struct {
		path, name, number, list, key string
		want                          []string
	}{
		{"/depinchain/market/v1/jobs?state=", "JOB_STATE_OPEN", "1", "jobs", "id", []string{"1"}},
		{"/depinchain/market/v1/jobs?state=", "JOB_STATE_CANCELLED", "4", "jobs", "id", []string{"2"}},
		{"/depinchain/market/v1/jobs?state=", "JOB_STATE_LEASED", "2", "jobs", "id", nil},
		{"/depinchain/stakingext/v1/providers?status=", "PROVIDER_STATUS_ACTIVE", "1", "providers", "operator", []string{provider}},
		{"/depinchain/stakingext/v1/providers?status=", "PROVIDER_STATUS_JAILED", "2", "providers", "operator", nil},
	} {
		codeName, byName := restGet(t, ctx, n, c.path+c.name)
		codeNum, byNumber := restGet(t, ctx, n, c.path+c.number)
		if codeName != http.StatusOK || codeNum != http.StatusOK {
			t.Fatalf("%s%s: %d %s; %s%s: %d %s", c.path, c.name, codeName, byName, c.path, c.number, codeNum, byNumber)
		}
		if byName != byNumber {
			t.Errorf("%s%s and %s%s differ:\n%s\n%s", c.path, c.name, c.path, c.number, byName, byNumber)
		}
		if got := ids(byName, c.list, c.key); !slices.Equal(got, c.want) {
			t.Errorf("%s%s lists %v, want %v", c.path, c.name, got, c.want)
		}
	}
	// The filter is applied: without it both jobs are listed.
	if _, all := restGet(t, ctx, n, "/depinchain/market/v1/jobs"); !slices.Equal(ids(all, "jobs", "id"), []string{"1", "2"}) {
		t.Errorf("unfiltered jobs: %s", all)
	}

	// Unknown names and numbers are refused with a 400 that names the value.
	for _, q := range []string{
		"/depinchain/market/v1/jobs?state=JOB_STATE_BOGUS", "/depinchain/market/v1/jobs?state=99",
		"/depinchain/market/v1/jobs?state=open", "/depinchain/stakingext/v1/providers?status=ACTIVE",
	} {
		code, body := restGet(t, ctx, n, q)
		value := q[strings.LastIndex(q, "=")+1:]
		if code != http.StatusBadRequest || !strings.Contains(body, value+" is not a valid") {
			t.Errorf("%s: %d %s; want 400 saying %q is not a valid value", q, code, body, value)
		}
	}
}

// scrapeNames returns the metric names a Prometheus endpoint serves; a
// histogram or summary family also names its _bucket, _sum and _count series.
func scrapeNames(t *testing.T, ctx context.Context, url string) map[string]bool {
	t.Helper()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		t.Fatal(err)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("scraping %s: %v", url, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("scraping %s: %s", url, resp.Status)
	}
	names := map[string]bool{}
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		if strings.HasPrefix(line, "# TYPE ") {
			f := strings.Fields(line)
			if len(f) == 4 && (f[3] == "histogram" || f[3] == "summary") {
				names[f[2]+"_sum"], names[f[2]+"_count"] = true, true
				if f[3] == "histogram" {
					names[f[2]+"_bucket"] = true
				}
			}
			continue
		}
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		if i := strings.IndexAny(line, "{ "); i > 0 {
			names[line[:i]] = true
		}
	}
	if err := sc.Err(); err != nil {
		t.Fatalf("reading %s: %v", url, err)
	}
	if len(names) == 0 {
		t.Fatalf("%s serves no metrics", url)
	}
	return names
}

func testNodeMetrics(t *testing.T, ctx context.Context, v *localnet.Validator) {
	// A few blocks with transactions (the subtest before) give every
	// series its first value.
	if err := v.WaitBlocks(ctx, 3); err != nil {
		t.Fatal(err)
	}
	served := scrapeNames(t, ctx, v.Metrics)
	for name := range scrapeNames(t, ctx, v.AppMetrics) {
		served[name] = true
	}
	if out := os.Getenv("DEPINCHAIN_WRITE_NODE_METRICS"); out != "" {
		var names []string
		for n := range served {
			names = append(names, n)
		}
		sort.Strings(names)
		if err := os.WriteFile(out, []byte(strings.Join(names, "\n")+"\n"), 0o644); err != nil {
			t.Fatal(err)
		}
		t.Logf("wrote %d metric names to %s", len(names), out)
	}
	raw, err := os.ReadFile(nodeMetricsFile)
	if err != nil {
		t.Fatal(err)
	}
	listed := 0
	for _, line := range strings.Split(string(raw), "\n") {
		name := strings.TrimSpace(line)
		if name == "" || strings.HasPrefix(name, "#") {
			continue
		}
		listed++
		if !served[name] {
			t.Errorf("%s lists %s, which the node does not serve", nodeMetricsFile, name)
		}
	}
	if listed == 0 {
		t.Fatalf("%s lists no metrics", nodeMetricsFile)
	}
}
