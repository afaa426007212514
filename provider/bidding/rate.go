package bidding

import (
	"context"
	"crypto/sha256"
	"fmt"
	"math"
	"time"

	"github.com/depinchain/depinchain/pkg/exact"
	"github.com/depinchain/depinchain/provider/config"
	markettypes "github.com/depinchain/depinchain/x/market/types"
)

// Rater computes the throughput a bid commits to (steps per hour of the job's workload
// on the GPUs the bid offers). For the exact transformer the cost of a step is known
// exactly (exact.Config.MACsPerStep), so the rate is the trainer's speed in
// multiply-accumulates per second — measured on this host for the in-process Go
// trainer, configured per GPU model for the PyTorch one — divided by it; container
// workloads commit the operator's configured rate. A bid commits commit_fraction of the
// estimate.
type Rater struct {
	cfg config.Throughput
	// goMACsPerSecond is the Go trainer's speed: configured, or measured by NewRater.
	goMACsPerSecond float64
}

// NewRater returns the rater of a throughput config, measuring the Go trainer's speed
// with one timed step of the reference model when the config does not give it.
func NewRater(cfg config.Throughput) (*Rater, error) {
	r := &Rater{cfg: cfg, goMACsPerSecond: cfg.GoTrainerMACsPerSecond}
	if r.goMACsPerSecond == 0 {
		speed, err := MeasureGoTrainer()
		if err != nil {
			return nil, fmt.Errorf("measuring the Go trainer: %w", err)
		}
		r.goMACsPerSecond = speed
	}
	return r, nil
}

// GoMACsPerSecond is the Go trainer's speed the rater uses.
func (r *Rater) GoMACsPerSecond() float64 { return r.goMACsPerSecond }

// MeasureGoTrainer times one training step of the reference model on this host (after
// one untimed step that warms the caches) and returns its multiply-accumulates per second.
func MeasureGoTrainer() (float64, error) {
	cfg := exact.ReferenceConfig()
	seed := sha256.Sum256([]byte("depinprovider throughput calibration"))
	s, err := exact.Init(cfg, seed[:])
	if err != nil {
		return 0, err
	}
	stream := make([]byte, 4*cfg.TokensPerStep()+int64(cfg.Model.Context)+1)
	for i := range stream {
		stream[i] = byte(i*131 + i/7)
	}
	var elapsed time.Duration
	for step := uint64(0); step < 2; step++ {
		batch, err := exact.StepBatch(s.Config, seed[:], step, stream)
		if err != nil {
			return 0, err
		}
		start := time.Now()
		if s, _, err = exact.Step(s, batch); err != nil {
			return 0, err
		}
		elapsed = time.Since(start)
	}
	return float64(cfg.MACsPerStep()) / max(elapsed.Seconds(), 1e-9), nil
}

// StepsPerHour is the rate a bid on job commits when runtime serves it on gpus, or why
// the provider cannot say.
func (r *Rater) StepsPerHour(_ context.Context, job markettypes.Job, runtime string, gpus []GPU) (uint64, error) {
	var perHour float64
	switch {
	case job.Spec.Workload.Kind.Adjudicable() && runtime == markettypes.RuntimeReference:
		cfg, err := job.Spec.ExactConfig()
		if err != nil {
			return 0, err
		}
		perHour = r.goMACsPerSecond * 3600 / float64(cfg.MACsPerStep())
	case job.Spec.Workload.Kind.Adjudicable():
		cfg, err := job.Spec.ExactConfig()
		if err != nil {
			return 0, err
		}
		// GPUs of a model the operator has not measured count as the host's Go trainer
		// speed, once: a floor the PyTorch trainer on any GPU beats, so the commitment
		// is safe, if low (it may lose auctions or miss max_duration).
		var macs float64
		unmeasured := false
		for _, g := range gpus {
			v, ok := r.cfg.MACsPerSecondPerGPU[g.Model]
			if !ok {
				unmeasured = true
				continue
			}
			macs += v
		}
		if unmeasured && macs == 0 {
			macs = r.goMACsPerSecond
		}
		perHour = macs * 3600 / float64(cfg.MACsPerStep())
	default:
		if r.cfg.ContainerStepsPerHour == 0 {
			return 0, fmt.Errorf("%s workloads need throughput.container_steps_per_hour to commit a rate", job.Spec.Workload.Kind)
		}
		perHour = float64(r.cfg.ContainerStepsPerHour)
	}
	committed := math.Floor(perHour * r.cfg.CommitFraction)
	if committed < 1 {
		return 0, fmt.Errorf("this host does less than one step of the job per hour (%.3g)", perHour)
	}
	return uint64(min(committed, markettypes.MaxStepsPerHour)), nil
}

// meetsDuration says why a committed rate cannot finish the job's remaining steps within
// max_duration (the chain refuses such a bid), or "" when it can.
func meetsDuration(job markettypes.Job, rate uint64) string {
	least := job.Spec.TotalSteps
	for w := uint32(0); w < job.Spec.Workers; w++ {
		step := uint64(0)
		for _, p := range job.Progress {
			if p.Worker == w {
				step = p.Step
			}
		}
		least = min(least, step)
	}
	if err := markettypes.ValidateRate(rate, job.Spec.TotalSteps-least, job.Spec.MaxDuration); err != nil {
		return "this host's committed rate cannot meet the job: " + err.Error()
	}
	return ""
}
