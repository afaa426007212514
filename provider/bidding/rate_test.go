package bidding

import (
	"context"
	"math"
	"strings"
	"testing"
	"time"

	"github.com/depinchain/depinchain/pkg/exact"
	"github.com/depinchain/depinchain/provider/config"
	markettypes "github.com/depinchain/depinchain/x/market/types"
)

// A job whose remaining steps the host cannot do within max_duration at its committed
// rate gets no bid, and the decision says why (the chain would refuse the bid).
func TestNoBidWhenTheRateCannotMeetMaxDuration(t *testing.T) {
	h := newHarness(t, false)
	h.openJob(1, 1)
	job := h.chain.Jobs[1]
	job.Spec.TotalSteps = 801 // 800 an hour commits 800 in the 1 h max duration
	h.chain.Jobs[1] = job
	if err := h.role.considerJob(context.Background(), 1); err != nil {
		t.Fatal(err)
	}
	if len(h.chain.Sent()) != 0 {
		t.Fatalf("sent %v, want no bid", h.chain.Sent())
	}
	_, rec, ok := h.bid(t, 1)
	if ok || !strings.Contains(rec.Decision, "800 steps per hour complete 800 steps in max_duration 1h0m0s, and 801 steps remain") {
		t.Fatalf("bid %v, decision %q", ok, rec.Decision)
	}
}

// A replacement round's cap on the price per step: a bid above it is not sent.
func TestNoBidAboveTheJobsPricePerStepCap(t *testing.T) {
	h := newHarness(t, false)
	h.openJob(1, 1)
	job := h.chain.Jobs[1]
	job.CapPricePerGpuHour, job.CapStepsPerHour = job.Spec.MaxPricePerGpuHour.SubAmount(job.Spec.MaxPricePerGpuHour.Amount.QuoRaw(2)), 1000
	h.chain.Jobs[1] = job
	if err := h.role.considerJob(context.Background(), 1); err != nil {
		t.Fatal(err)
	}
	_, rec, ok := h.bid(t, 1)
	if ok || !strings.Contains(rec.Decision, "dearer per step than the job's cap") {
		t.Fatalf("bid %v, decision %q", ok, rec.Decision)
	}
}

func TestRaterCommitsAFractionOfTheTrainersSpeed(t *testing.T) {
	r, err := NewRater(config.Throughput{CommitFraction: 0.5, GoTrainerMACsPerSecond: 2e9,
		MACsPerSecondPerGPU: map[string]float64{"H100": 1e14}})
	if err != nil {
		t.Fatal(err)
	}
	ref := markettypes.Job{Spec: markettypes.JobSpec{Workload: markettypes.Workload{Kind: markettypes.WORKLOAD_KIND_REFERENCE}}}
	macs := float64(exact.ReferenceConfig().MACsPerStep())
	got, err := r.StepsPerHour(context.Background(), ref, markettypes.RuntimeReference, nil)
	if want := uint64(math.Floor(2e9 * 3600 / macs * 0.5)); err != nil || got != want {
		t.Fatalf("Go trainer: %d (%v), want %d", got, err, want)
	}
	two := []GPU{{UUID: "a", Model: "H100"}, {UUID: "b", Model: "H100"}}
	got, err = r.StepsPerHour(context.Background(), ref, markettypes.RuntimeProcess, two)
	if want := uint64(math.Min(math.Floor(2e14*3600/macs*0.5), markettypes.MaxStepsPerHour)); err != nil || got != want {
		t.Fatalf("PyTorch trainer on 2 GPUs: %d (%v), want %d", got, err, want)
	}
	got, err = r.StepsPerHour(context.Background(), ref, markettypes.RuntimeProcess, []GPU{{UUID: "c", Model: "A100"}})
	if want := uint64(math.Floor(2e9 * 3600 / macs * 0.5)); err != nil || got != want {
		t.Fatalf("a GPU model nobody measured commits the Go trainer's speed: %d (%v), want %d", got, err, want)
	}
	container := markettypes.Job{Spec: markettypes.JobSpec{Workload: markettypes.Workload{Kind: markettypes.WORKLOAD_KIND_CONTAINER}}}
	if _, err := r.StepsPerHour(context.Background(), container, markettypes.RuntimeContainer, two); err == nil ||
		!strings.Contains(err.Error(), "throughput.container_steps_per_hour") {
		t.Fatalf("container without a configured rate: %v", err)
	}
}

func TestMeasureGoTrainerTimesARealStep(t *testing.T) {
	start := time.Now()
	speed, err := MeasureGoTrainer()
	if err != nil {
		t.Fatal(err)
	}
	if speed <= 0 || math.IsInf(speed, 0) {
		t.Fatalf("speed %g MAC/s", speed)
	}
	t.Logf("Go trainer: %.3g MAC/s, measured in %s", speed, time.Since(start))
}
