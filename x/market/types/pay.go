package types

import (
	"time"

	errorsmod "cosmossdk.io/errors"
	"cosmossdk.io/math"
)

// MaxStepsPerHour bounds a committed rate (about 278 000 steps a second): anything above
// is not a throughput but an attempt to win the auction on a price per step of zero.
const MaxStepsPerHour = 1_000_000_000

// Pay for work (issue 15). A lease earns per step, at its price per step
// price_per_gpu_hour × gpus ÷ steps_per_hour. Amounts are computed from those three
// integers exactly, for the total since the lease's resume step, so rounding never
// accumulates across checkpoints: the pay for n steps is ⌊price × gpus × n ÷ rate⌋.

// PayForSteps is what a lease at pricePerGPUHour for gpus GPUs, committed to
// stepsPerHour, earns for steps steps, rounded down. A lease without a rate (written by
// the previous release only; the v4 migration gives each one) earns nothing.
func PayForSteps(pricePerGPUHour math.Int, gpus uint32, stepsPerHour, steps uint64) math.Int {
	if stepsPerHour == 0 || steps == 0 {
		return math.ZeroInt()
	}
	return pricePerGPUHour.MulRaw(int64(gpus)).Mul(math.NewIntFromUint64(steps)).Quo(math.NewIntFromUint64(stepsPerHour))
}

// PricePerStep is price × gpus ÷ rate as a decimal, for display and reports; comparisons
// and payments use the exact integer forms.
func PricePerStep(pricePerGPUHour math.Int, gpus uint32, stepsPerHour uint64) math.LegacyDec {
	if stepsPerHour == 0 {
		return math.LegacyZeroDec()
	}
	return math.LegacyNewDecFromInt(pricePerGPUHour.MulRaw(int64(gpus))).QuoInt(math.NewIntFromUint64(stepsPerHour))
}

// CheaperPerStep reports whether price a at rate ra costs strictly less per step than
// price b at rate rb (same GPUs): a ÷ ra < b ÷ rb, compared exactly as a × rb < b × ra.
func CheaperPerStep(a math.Int, ra uint64, b math.Int, rb uint64) bool {
	return a.Mul(math.NewIntFromUint64(rb)).LT(b.Mul(math.NewIntFromUint64(ra)))
}

// StepsWithin is how many steps a rate completes in d, rounded down.
func StepsWithin(stepsPerHour uint64, d time.Duration) math.Int {
	if d <= 0 {
		return math.ZeroInt()
	}
	return math.NewIntFromUint64(stepsPerHour).MulRaw(int64(d)).QuoRaw(nanosPerHour)
}

// ValidateRate checks a committed rate against a job: it must be positive, at most
// MaxStepsPerHour, and complete remaining steps within the job's max_duration.
func ValidateRate(stepsPerHour uint64, remaining uint64, maxDuration time.Duration) error {
	if stepsPerHour == 0 {
		return errorsmod.Wrapf(ErrInvalidRate, "a bid must commit a throughput: steps_per_hour is 0 (--steps-per-hour)")
	}
	if stepsPerHour > MaxStepsPerHour {
		return errorsmod.Wrapf(ErrInvalidRate, "steps_per_hour %d is above the most a bid may commit, %d", stepsPerHour, uint64(MaxStepsPerHour))
	}
	if within := StepsWithin(stepsPerHour, maxDuration); within.LT(math.NewIntFromUint64(remaining)) {
		return errorsmod.Wrapf(ErrRateTooLow, "%d steps per hour complete %s steps in max_duration %s, and %d steps remain",
			stepsPerHour, within, maxDuration, remaining)
	}
	return nil
}

// ConservativeRate is the rate a lease or bid from before committed rates gets in the v4
// migration: the slowest that still finishes totalSteps within maxDuration (rounded up),
// so the lease's most pay, total_steps × price per step, is the price × GPUs × max_duration
// it could earn by time under the old rule and not more.
func ConservativeRate(totalSteps uint64, maxDuration time.Duration) uint64 {
	if maxDuration <= 0 || totalSteps == 0 {
		return 1
	}
	r := math.NewIntFromUint64(totalSteps).MulRaw(nanosPerHour)
	d := math.NewInt(int64(maxDuration))
	rate := r.Add(d).SubRaw(1).Quo(d)
	if !rate.IsUint64() || rate.Uint64() > MaxStepsPerHour {
		return MaxStepsPerHour
	}
	return max(rate.Uint64(), 1)
}
