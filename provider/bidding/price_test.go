package bidding

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"cosmossdk.io/math"

	sdk "github.com/cosmos/cosmos-sdk/types"

	markettypes "github.com/depinchain/depinchain/x/market/types"
)

func spec(models []string, minGiB uint64, perWorker uint32, maxPrice int64) markettypes.JobSpec {
	return markettypes.JobSpec{
		Name: "job", Workers: 1, TotalSteps: 100, MaxDuration: time.Hour,
		Gpu:                markettypes.GPURequirement{Models: models, MinVramGib: minGiB, PerWorker: perWorker},
		MaxPricePerGpuHour: sdk.NewInt64Coin("udepin", maxPrice),
	}
}

func gpus(model string, vram uint64, n int) []GPU {
	out := make([]GPU, n)
	for i := range out {
		out[i] = GPU{UUID: model + "-" + string(rune('a'+i)), Model: model, VRAMMiB: vram}
	}
	return out
}

func TestMatch(t *testing.T) {
	host := append(gpus("H100", 81920, 4), gpus("A100-40", 40960, 8)...)
	tests := []struct {
		name      string
		spec      markettypes.JobSpec
		wantModel string
		wantErr   string
	}{
		{"any model prefers the smallest card that fits", spec(nil, 40, 4, 10), "A100-40", ""},
		{"memory rules out the smaller card", spec(nil, 80, 4, 10), "H100", ""},
		{"allowed models restrict the choice", spec([]string{"H100"}, 16, 2, 10), "H100", ""},
		{"not enough GPUs of one model", spec([]string{"H100"}, 16, 5, 10), "", "no 5 free healthy GPUs"},
		{"unknown model", spec([]string{"MI300X"}, 16, 1, 10), "", "no 1 free healthy GPUs"},
		{"too much memory asked", spec(nil, 96, 1, 10), "", "at least 96 GiB"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, err := Match(tc.spec, host)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("err = %v, want %q", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if len(got) != int(tc.spec.Gpu.PerWorker) {
				t.Fatalf("got %d GPUs, want %d", len(got), tc.spec.Gpu.PerWorker)
			}
			for _, g := range got {
				if g.Model != tc.wantModel {
					t.Fatalf("got %s, want %s", g.Model, tc.wantModel)
				}
			}
		})
	}
}

func TestMatchIsDeterministic(t *testing.T) {
	host := gpus("H100", 81920, 8)
	reversed := make([]GPU, len(host))
	for i := range host {
		reversed[len(host)-1-i] = host[i]
	}
	a, err := Match(spec(nil, 80, 3, 10), host)
	if err != nil {
		t.Fatal(err)
	}
	b, err := Match(spec(nil, 80, 3, 10), reversed)
	if err != nil {
		t.Fatal(err)
	}
	for i := range a {
		if a[i] != b[i] {
			t.Fatalf("input order changed the choice: %v vs %v", a, b)
		}
	}
}

func TestTablePricer(t *testing.T) {
	p := TablePricer{Denom: "udepin", Table: PriceTable{"H100": math.NewInt(1_500_000)}}
	price, err := p.Price(context.Background(), spec(nil, 80, 1, 2_000_000), gpus("H100", 81920, 1))
	if err != nil || !price.Equal(sdk.NewInt64Coin("udepin", 1_500_000)) {
		t.Fatalf("price %v, err %v", price, err)
	}
	if _, err := p.Price(context.Background(), spec(nil, 80, 1, 1_000_000), gpus("H100", 81920, 1)); !errors.Is(err, ErrNotProfitable) {
		t.Fatalf("ceiling below table price: err = %v", err)
	}
	if _, err := p.Price(context.Background(), spec(nil, 40, 1, 2_000_000), gpus("A100", 40960, 1)); err == nil || !strings.Contains(err.Error(), "no entry for A100") {
		t.Fatalf("missing model: err = %v", err)
	}
}

func writeScript(t *testing.T, body string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "price.sh")
	if err := os.WriteFile(p, []byte("#!/bin/sh\n"+body), 0o755); err != nil {
		t.Fatal(err)
	}
	return p
}

func TestCommandPricer(t *testing.T) {
	ctx := context.Background()
	// The script echoes back a price derived from its JSON input, proving it read stdin.
	ok := writeScript(t, `grep -q '"gpu_model":"H100"' && echo '{"price_per_gpu_hour":"1200000udepin"}'`)
	price, err := CommandPricer{Command: []string{ok}}.Price(ctx, spec(nil, 80, 1, 2_000_000), gpus("H100", 81920, 1))
	if err != nil || !price.Equal(sdk.NewInt64Coin("udepin", 1_200_000)) {
		t.Fatalf("price %v, err %v", price, err)
	}
	for name, tc := range map[string]struct{ script, want string }{
		"non-zero exit":   {`echo boom >&2; exit 3`, "boom"},
		"garbage output":  {`echo hello`, "output is not"},
		"unknown field":   {`echo '{"price":"1udepin"}'`, "output is not"},
		"bad coin":        {`echo '{"price_per_gpu_hour":"lots"}'`, `price "lots"`},
		"above ceiling":   {`echo '{"price_per_gpu_hour":"9000000udepin"}'`, "below the operator's price"},
		"wrong denom":     {`echo '{"price_per_gpu_hour":"5uatom"}'`, "not in the job's denom"},
		"hangs past time": {`sleep 5`, "signal: killed"},
	} {
		t.Run(name, func(t *testing.T) {
			p := CommandPricer{Command: []string{writeScript(t, tc.script)}, Timeout: 300 * time.Millisecond}
			_, err := p.Price(ctx, spec(nil, 80, 1, 2_000_000), gpus("H100", 81920, 1))
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("err = %v, want it to mention %q", err, tc.want)
			}
		})
	}
}
