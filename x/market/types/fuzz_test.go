package types_test

import (
	"math/big"
	"strings"
	"testing"
	"time"

	"cosmossdk.io/math"

	sdk "github.com/cosmos/cosmos-sdk/types"

	"github.com/depinchain/depinchain/x/market/types"
)

// checkAcceptedSpec holds for every spec that passes validation: the numbers derived from
// it on chain (lease value, collateral, the amount a lease owes at any time up to its max
// duration) are computable without overflow and not negative.
func checkAcceptedSpec(t *testing.T, s types.JobSpec) {
	t.Helper()
	if err := s.ValidateStateless(); err != nil {
		t.Fatalf("accepted spec fails ValidateStateless: %v", err)
	}
	p := types.DefaultParams()
	p.CollateralRatio = math.LegacyNewDec(10) // the largest ratio params allow
	if v := s.MaxLeaseValue(); v.IsNegative() {
		t.Fatalf("negative max lease value %s", v)
	}
	if c := s.RequiredCollateral(p); c.IsNegative() {
		t.Fatalf("negative collateral %s", c)
	}
	if o := types.AmountOwed(s.MaxPricePerGpuHour.Amount, s.Gpu.PerWorker, s.MaxDuration); o.IsNegative() {
		t.Fatalf("negative amount owed %s", o)
	}
}

func FuzzParseJobSpecYAML(f *testing.F) {
	huge := "1" + strings.Repeat("0", 70)
	beyond256Bits := new(big.Int).Lsh(big.NewInt(1), 256).String()
	seeds := []string{
		validYAML,
		minimalYAML,
		"",
		"name: [unclosed",
		"- a\n- b",
		validYAML + "gpu_model: H100\n",
		validYAML + "name: twice\n",
		replaceLine("max_price_per_gpu_hour:", "max_price_per_gpu_hour: "+huge+"udepin"),
		replaceLine("max_price_per_gpu_hour:", "max_price_per_gpu_hour: "+beyond256Bits+"udepin"),
		replaceLine("max_price_per_gpu_hour:", "max_price_per_gpu_hour: 1.5udepin"),
		replaceLine("max_duration:", "max_duration: 9999999999h"),
		replaceLine("cpu:", "cpu: 1e308"),
		replaceLine("per_worker:", "per_worker: 4294967296"),
		replaceLine("workers:", "workers: !!binary aGVsbG8="),
		"name: &a x\ngpu: *a\n",
		"{}",
		"null",
	}
	for _, s := range seeds {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		spec, err := types.ParseJobSpecYAML(data)
		if err != nil {
			if !strings.HasPrefix(err.Error(), "job spec: ") {
				t.Fatalf("error without the job spec prefix: %v", err)
			}
			return
		}
		checkAcceptedSpec(t, spec)
		// What the CLI accepts, the chain accepts in default params unless a param bound is hit.
		if err := spec.ValidateWithParams(types.DefaultParams()); err != nil && !strings.Contains(err.Error(), "workers") &&
			!strings.Contains(err.Error(), "bidding_window_blocks") && !strings.Contains(err.Error(), "max_price_per_gpu_hour: must be in") {
			t.Fatalf("parsed spec rejected by ValidateWithParams for another reason: %v", err)
		}
	})
}

func FuzzJobSpecValidate(f *testing.F) {
	v := validSpec()
	f.Add(v.Name, "H100-SXM5-80GB,H200", uint64(80), uint32(8), uint32(2), int32(types.WORKLOAD_KIND_CONTAINER), v.Workload.Image, v.Workload.Digest,
		uint64(10_000), uint64(500), "2000000", "udepin", int64(48*time.Hour), uint64(20))
	f.Add("ref", "", uint64(1), uint32(1), uint32(1), int32(types.WORKLOAD_KIND_REFERENCE), "", "",
		uint64(1), uint64(1), "1", "udepin", int64(time.Nanosecond), uint64(2))
	f.Add("", "a,a", uint64(0), uint32(0), uint32(0), int32(7), "img", "sha256:zz", uint64(0), uint64(0), "-1", "", int64(-1), uint64(0))
	f.Add("big", "H100", uint64(1<<63), uint32(64), uint32(1<<31), int32(types.WORKLOAD_KIND_REFERENCE), "", "",
		uint64(1<<63), uint64(1<<63), "1"+strings.Repeat("0", 76), "udepin", int64(types.MaxJobDuration), uint64(1<<40))
	f.Fuzz(func(t *testing.T, name, models string, minVram uint64, perWorker, workers uint32, kind int32, image, digest string,
		totalSteps, interval uint64, price, denom string, maxDuration int64, window uint64) {
		amount, ok := math.NewIntFromString(price)
		if !ok {
			return
		}
		s := types.JobSpec{
			Name:                name,
			Gpu:                 types.GPURequirement{MinVramGib: minVram, PerWorker: perWorker},
			Workers:             workers,
			Workload:            types.Workload{Kind: types.WorkloadKind(kind), Image: image, Digest: digest},
			TotalSteps:          totalSteps,
			CheckpointInterval:  interval,
			MaxPricePerGpuHour:  sdk.Coin{Denom: denom, Amount: amount},
			MaxDuration:         time.Duration(maxDuration),
			BiddingWindowBlocks: window,
		}
		if models != "" {
			s.Gpu.Models = strings.Split(models, ",")
		}
		stateless := s.ValidateStateless()
		withParams := s.ValidateWithParams(types.DefaultParams())
		if withParams == nil && stateless != nil {
			t.Fatalf("ValidateWithParams accepted what ValidateStateless rejects: %v", stateless)
		}
		if stateless != nil {
			return
		}
		checkAcceptedSpec(t, s)
		// The wire form carries a valid spec unchanged.
		bz, err := s.Marshal()
		if err != nil {
			t.Fatal(err)
		}
		var back types.JobSpec
		if err := back.Unmarshal(bz); err != nil {
			t.Fatal(err)
		}
		if err := back.ValidateStateless(); err != nil {
			t.Fatalf("spec invalid after a proto round trip: %v", err)
		}
	})
}

// FuzzAmountOwed compares the keeper's payment formula with big-integer arithmetic and
// checks that it never decreases as time passes.
func FuzzAmountOwed(f *testing.F) {
	f.Add(int64(3600), uint32(2), int64(time.Second), int64(time.Minute))
	f.Add(int64(1237), uint32(64), int64(time.Hour-1), int64(1))
	f.Add(int64(1)<<62, uint32(64), int64(types.MaxJobDuration), int64(0))
	f.Fuzz(func(t *testing.T, price int64, gpus uint32, elapsed, more int64) {
		if price < 0 || elapsed < 0 || more < 0 || elapsed > int64(types.MaxJobDuration) || more > int64(types.MaxJobDuration) || gpus > types.MaxGPUsPerWorker {
			return
		}
		got := types.AmountOwed(math.NewInt(price), gpus, time.Duration(elapsed))
		want := new(big.Int).Mul(big.NewInt(price), big.NewInt(int64(gpus)))
		want.Mul(want, big.NewInt(elapsed)).Quo(want, big.NewInt(int64(time.Hour)))
		if got.BigInt().Cmp(want) != 0 {
			t.Fatalf("AmountOwed(%d, %d, %d) = %s, want %s", price, gpus, elapsed, got, want)
		}
		later := types.AmountOwed(math.NewInt(price), gpus, time.Duration(elapsed)+time.Duration(more))
		if later.LT(got) {
			t.Fatalf("owed decreased from %s to %s", got, later)
		}
	})
}
