package bidding

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os/exec"
	"sort"
	"syscall"
	"time"

	"cosmossdk.io/math"

	sdk "github.com/cosmos/cosmos-sdk/types"

	"github.com/depinchain/depinchain/provider/config"
	markettypes "github.com/depinchain/depinchain/x/market/types"
)

// GPU is one device the bidder may offer: healthy and not serving another lease.
type GPU struct {
	UUID    string
	Model   string
	VRAMMiB uint64
}

// Match picks gpus_per_worker free GPUs of one allowed model with enough memory for a job,
// preferring the model the price table makes cheapest to offer, or explains why none fit.
// All GPUs of a lease come from one model: mixed models would make a data-parallel worker
// run at its slowest device's pace.
func Match(spec markettypes.JobSpec, free []GPU) ([]GPU, error) {
	need := int(spec.Gpu.PerWorker)
	minVRAM := spec.MinVRAMMiB()
	allowed := map[string]bool{}
	for _, m := range spec.Gpu.Models {
		allowed[m] = true
	}
	byModel := map[string][]GPU{}
	for _, g := range free {
		if (len(allowed) == 0 || allowed[g.Model]) && g.VRAMMiB >= minVRAM {
			byModel[g.Model] = append(byModel[g.Model], g)
		}
	}
	models := make([]string, 0, len(byModel))
	for m, gs := range byModel {
		if len(gs) >= need {
			models = append(models, m)
		}
	}
	if len(models) == 0 {
		return nil, fmt.Errorf("no %d free healthy GPUs of models %v with at least %d GiB", need, spec.Gpu.Models, spec.Gpu.MinVramGib)
	}
	// Deterministic choice: the model with the least memory that still fits keeps the
	// bigger cards free for jobs that need them.
	sort.Slice(models, func(i, j int) bool {
		a, b := byModel[models[i]][0], byModel[models[j]][0]
		if a.VRAMMiB != b.VRAMMiB {
			return a.VRAMMiB < b.VRAMMiB
		}
		return models[i] < models[j]
	})
	chosen := byModel[models[0]]
	sort.Slice(chosen, func(i, j int) bool { return chosen[i].UUID < chosen[j].UUID })
	return chosen[:need], nil
}

// PriceTable maps a GPU model to the operator's price per GPU-hour in the chain's denom.
type PriceTable map[string]math.Int

// Pricer prices a bid for a job on the matched GPUs.
type Pricer interface {
	Price(ctx context.Context, spec markettypes.JobSpec, gpus []GPU) (sdk.Coin, error)
}

// TablePricer prices from a static table.
type TablePricer struct {
	Denom string
	Table PriceTable
}

// ErrNotProfitable means the job's ceiling is below what the operator asks.
var ErrNotProfitable = errors.New("job's max price is below the operator's price")

// Price returns the table price for the GPUs' model, refusing jobs whose ceiling is lower.
func (p TablePricer) Price(_ context.Context, spec markettypes.JobSpec, gpus []GPU) (sdk.Coin, error) {
	if len(gpus) == 0 {
		return sdk.Coin{}, errors.New("no GPUs to price")
	}
	price, ok := p.Table[gpus[0].Model]
	if !ok {
		return sdk.Coin{}, fmt.Errorf("price table has no entry for %s", gpus[0].Model)
	}
	return checkCeiling(spec, sdk.NewCoin(p.Denom, price))
}

func checkCeiling(spec markettypes.JobSpec, price sdk.Coin) (sdk.Coin, error) {
	if !price.IsPositive() {
		return sdk.Coin{}, fmt.Errorf("price %s must be positive", price)
	}
	if price.Denom != spec.MaxPricePerGpuHour.Denom {
		return sdk.Coin{}, fmt.Errorf("price %s is not in the job's denom %s", price, spec.MaxPricePerGpuHour.Denom)
	}
	if spec.MaxPricePerGpuHour.IsLT(price) {
		return sdk.Coin{}, fmt.Errorf("%w: %s > %s", ErrNotProfitable, price, spec.MaxPricePerGpuHour)
	}
	return price, nil
}

// CommandPricer asks an external program: it writes a JSON request on the program's stdin
// and reads {"price_per_gpu_hour": "<amount><denom>"} from its stdout. Operators plug in
// spot-price feeds or utilisation-aware pricing this way without rebuilding the sidecar.
type CommandPricer struct {
	Command []string
	Timeout time.Duration
}

// PricingRequest is what the pricing command reads.
type PricingRequest struct {
	JobName            string   `json:"job_name"`
	GPUModel           string   `json:"gpu_model"`
	GPUs               uint32   `json:"gpus"`
	Workers            uint32   `json:"workers"`
	TotalSteps         uint64   `json:"total_steps"`
	MaxDurationSeconds int64    `json:"max_duration_seconds"`
	MaxPricePerGPUHour string   `json:"max_price_per_gpu_hour"`
	AllowedModels      []string `json:"allowed_models"`
}

// PricingResponse is what the pricing command writes.
type PricingResponse struct {
	PricePerGPUHour string `json:"price_per_gpu_hour"`
}

// Price runs the command and validates its answer against the job's ceiling.
func (p CommandPricer) Price(ctx context.Context, spec markettypes.JobSpec, gpus []GPU) (sdk.Coin, error) {
	if len(p.Command) == 0 {
		return sdk.Coin{}, errors.New("pricing command is empty")
	}
	if len(gpus) == 0 {
		return sdk.Coin{}, errors.New("no GPUs to price")
	}
	timeout := p.Timeout
	if timeout <= 0 {
		timeout = 5 * time.Second
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	req, err := json.Marshal(PricingRequest{
		JobName: spec.Name, GPUModel: gpus[0].Model, GPUs: uint32(len(gpus)), Workers: spec.Workers,
		TotalSteps: spec.TotalSteps, MaxDurationSeconds: int64(spec.MaxDuration / time.Second),
		MaxPricePerGPUHour: spec.MaxPricePerGpuHour.String(), AllowedModels: spec.Gpu.Models,
	})
	if err != nil {
		return sdk.Coin{}, err
	}
	cmd := exec.CommandContext(ctx, p.Command[0], p.Command[1:]...)
	// Run it in its own process group and kill the whole group on timeout: a shell
	// script's children would otherwise hold stdout open and keep us waiting.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) }
	cmd.WaitDelay = time.Second
	cmd.Stdin = bytes.NewReader(req)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		return sdk.Coin{}, fmt.Errorf("pricing command %v: %w: %s", p.Command, err, bytes.TrimSpace(stderr.Bytes()))
	}
	var resp PricingResponse
	dec := json.NewDecoder(&stdout)
	dec.DisallowUnknownFields()
	if err := dec.Decode(&resp); err != nil {
		return sdk.Coin{}, fmt.Errorf("pricing command %v: output is not {\"price_per_gpu_hour\": ...}: %w", p.Command, err)
	}
	price, err := sdk.ParseCoinNormalized(resp.PricePerGPUHour)
	if err != nil {
		return sdk.Coin{}, fmt.Errorf("pricing command %v: price %q: %w", p.Command, resp.PricePerGPUHour, err)
	}
	return checkCeiling(spec, price)
}

// PricerFor is the pricer the operator configured: the pricing command when
// one is set, else the price table in denom.
func PricerFor(p config.Pricing, denom string) Pricer {
	if len(p.PricingCommand) > 0 {
		return CommandPricer{Command: p.PricingCommand, Timeout: 10 * time.Second}
	}
	table := PriceTable{}
	for model, price := range p.Table {
		table[model] = math.NewIntFromUint64(price)
	}
	return TablePricer{Denom: denom, Table: table}
}
