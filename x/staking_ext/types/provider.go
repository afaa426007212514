package types

import (
	"fmt"
	"net/url"
	"slices"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"

	errorsmod "cosmossdk.io/errors"
	"cosmossdk.io/math"

	sdk "github.com/cosmos/cosmos-sdk/types"
)

// Length limits of the descriptive fields. They keep a provider record small
// and bound what a registration can make every node store.
const (
	MaxMonikerLength  = 70
	MaxEndpointLength = 256
	MaxRegionLength   = 64
	MaxModelLength    = 64
	MaxLockRefLength  = 128
)

// reputationCounterCap bounds each counter in Score so that the weighted sum
// cannot overflow int64; no real provider gets anywhere near it.
const reputationCounterCap = 1 << 59

// Score condenses the track record into one number for auction tie-breaks:
// a completed lease counts +1, a failed one −2 and a slash −5, because a
// failure costs the job owner more than a success earns and a slash means
// proven misbehaviour.
func (r Reputation) Score() int64 {
	capped := func(counter uint64) int64 { return int64(min(counter, reputationCounterCap)) }
	return capped(r.LeasesCompleted) - 2*capped(r.LeasesFailed) - 5*capped(r.Slashes)
}

// TotalGPUs is the number of GPUs over all classes.
func (p Provider) TotalGPUs() uint64 {
	var total uint64
	for _, gpu := range p.Gpus {
		total += uint64(gpu.Count)
	}
	return total
}

// FreeBond is the part of the bond not held as collateral: max(0, bond − locked).
// It is what new collateral locks and unbonding may take. A slash reduces the
// bond without touching locks, so locked may exceed bond and free bond is then zero.
func (p Provider) FreeBond() sdk.Coin {
	free := p.Bond.Amount.Sub(p.Locked.Amount)
	if !free.IsPositive() {
		free = math.ZeroInt()
	}
	return sdk.NewCoin(p.Bond.Denom, free)
}

// CheckBidding returns why params refuse every bid of p, whatever the job's collateral:
// it is jailed (until it unjails), tombstoned (for good), or its bond is below
// min_bond_per_gpu × its GPUs. Nil: only the job's collateral against the free bond is
// left to check. The keeper's CheckCanBid and the provider sidecar both use it, so the
// sidecar stops bidding exactly when the chain would refuse.
func (p Provider) CheckBidding(params Params) error {
	switch p.Status {
	case PROVIDER_STATUS_JAILED:
		return errorsmod.Wrapf(ErrJailed, "%s is jailed until %s and must unjail before bidding",
			p.Operator, p.JailedUntil.UTC().Format(time.RFC3339))
	case PROVIDER_STATUS_TOMBSTONED:
		return errorsmod.Wrapf(ErrTombstoned, "%s is tombstoned and can never bid", p.Operator)
	}
	if required := params.RequiredBond(p.TotalGPUs()); p.Bond.IsLT(required) {
		return errorsmod.Wrapf(ErrBondBelowMinimum, "%s has bond %s but its %d GPUs need %s; bond %s more",
			p.Operator, p.Bond, p.TotalGPUs(), required, required.Sub(p.Bond))
	}
	return nil
}

// Satisfies reports whether one GPU class of the provider can host a worker
// needing count GPUs of one of models with at least minVRAMMiB each. An
// empty models list accepts any model. A worker runs on one host class, so
// GPUs of different classes are not added up.
func (p Provider) Satisfies(models []string, minVRAMMiB uint64, count uint32) bool {
	for _, gpu := range p.Gpus {
		if len(models) > 0 && !slices.Contains(models, gpu.Model) {
			continue
		}
		if gpu.VramMib >= minVRAMMiB && gpu.Count >= count {
			return true
		}
	}
	return false
}

// ValidateDescription checks the human-facing fields of a provider. The
// endpoint must be an absolute http(s) URL without credentials: challengers
// and clients fetch checkpoints and proofs from it.
func ValidateDescription(moniker, endpoint, region string) error {
	if problem := textProblem("moniker", moniker, MaxMonikerLength); problem != "" {
		return errorsmod.Wrap(ErrInvalidDescription, problem)
	}
	if err := validateEndpoint(endpoint); err != nil {
		return err
	}
	if problem := textProblem("region", region, MaxRegionLength); problem != "" {
		return errorsmod.Wrap(ErrInvalidDescription, problem)
	}
	return nil
}

func validateEndpoint(endpoint string) error {
	if endpoint == "" {
		return errorsmod.Wrap(ErrInvalidDescription, "endpoint must not be empty")
	}
	if len(endpoint) > MaxEndpointLength {
		return errorsmod.Wrapf(ErrInvalidDescription, "endpoint is %d bytes long, at most %d allowed", len(endpoint), MaxEndpointLength)
	}
	if !utf8.ValidString(endpoint) || strings.ContainsFunc(endpoint, func(r rune) bool { return unicode.IsSpace(r) || unicode.IsControl(r) }) {
		return errorsmod.Wrapf(ErrInvalidDescription, "endpoint %q must not contain spaces or control characters", endpoint)
	}
	u, err := url.Parse(endpoint)
	if err != nil {
		return errorsmod.Wrapf(ErrInvalidDescription, "endpoint %q is not a URL: %s", endpoint, err)
	}
	if u.Scheme != "http" && u.Scheme != "https" {
		return errorsmod.Wrapf(ErrInvalidDescription, "endpoint %q must use http or https", endpoint)
	}
	if u.Opaque != "" || u.Hostname() == "" {
		return errorsmod.Wrapf(ErrInvalidDescription, "endpoint %q must name a host, e.g. https://gpu1.example.com:8443", endpoint)
	}
	if u.User != nil {
		return errorsmod.Wrapf(ErrInvalidDescription, "endpoint %q must not carry credentials: provider records are public", endpoint)
	}
	return nil
}

// textProblem describes what is wrong with a descriptive text field, or
// returns "" when it is non-empty, valid UTF-8 without control characters or
// surrounding whitespace, and at most maxLen bytes long.
func textProblem(field, value string, maxLen int) string {
	switch {
	case value == "":
		return fmt.Sprintf("%s must not be empty", field)
	case len(value) > maxLen:
		return fmt.Sprintf("%s is %d bytes long, at most %d allowed", field, len(value), maxLen)
	case !utf8.ValidString(value) || strings.ContainsFunc(value, unicode.IsControl):
		return fmt.Sprintf("%s %q must be valid UTF-8 without control characters", field, value)
	case strings.TrimSpace(value) != value:
		return fmt.Sprintf("%s %q must not start or end with whitespace", field, value)
	}
	return ""
}

// ValidateGPUs checks a GPU inventory: every class has a model, VRAM and a
// count, no model+VRAM class appears twice (job matching reads one entry per
// class) and there are at most maxClasses classes. An empty inventory is
// valid: a provider may bond for storage only and will not satisfy any job.
func ValidateGPUs(gpus []GPUInventory, maxClasses uint32) error {
	if uint64(len(gpus)) > uint64(maxClasses) {
		return errorsmod.Wrapf(ErrInvalidGPU, "gpus has %d classes, at most %d (max_gpu_classes) allowed", len(gpus), maxClasses)
	}
	type gpuClass struct {
		model   string
		vramMiB uint64
	}
	seen := make(map[gpuClass]struct{}, len(gpus))
	for i, gpu := range gpus {
		if problem := textProblem("model", gpu.Model, MaxModelLength); problem != "" {
			return errorsmod.Wrapf(ErrInvalidGPU, "gpus[%d]: %s", i, problem)
		}
		if gpu.VramMib == 0 {
			return errorsmod.Wrapf(ErrInvalidGPU, "gpus[%d] (%s): vram_mib must be positive", i, gpu.Model)
		}
		if gpu.Count == 0 {
			return errorsmod.Wrapf(ErrInvalidGPU, "gpus[%d] (%s): count must be positive", i, gpu.Model)
		}
		class := gpuClass{model: gpu.Model, vramMiB: gpu.VramMib}
		if _, dup := seen[class]; dup {
			return errorsmod.Wrapf(ErrInvalidGPU, "gpus[%d]: class %s with %d MiB is listed twice; add up the counts instead", i, gpu.Model, gpu.VramMib)
		}
		seen[class] = struct{}{}
	}
	return nil
}

// ValidatePositiveAmount checks that amount is a positive coin of the bond
// denomination; field names the message field in the error.
func ValidatePositiveAmount(field string, amount sdk.Coin, bondDenom string) error {
	if err := ValidateNonNegativeAmount(field, amount, bondDenom); err != nil {
		return err
	}
	if !amount.IsPositive() {
		return errorsmod.Wrapf(ErrInvalidAmount, "%s must be positive, got %s", field, amount)
	}
	return nil
}

// ValidateNonNegativeAmount checks that amount is a non-negative coin of the
// bond denomination. Zero is allowed where it means something: a bond that
// was slashed or unbonded away, or a zero-collateral lock, which still
// records that a reference holds a lease so that unlocking stays symmetric.
func ValidateNonNegativeAmount(field string, amount sdk.Coin, bondDenom string) error {
	if amount.Denom != bondDenom {
		return errorsmod.Wrapf(ErrInvalidDenom, "%s must be in %s, got %q", field, bondDenom, amount.Denom)
	}
	if amount.Amount.IsNil() {
		return errorsmod.Wrapf(ErrInvalidAmount, "%s has no amount", field)
	}
	if amount.Amount.IsNegative() {
		return errorsmod.Wrapf(ErrInvalidAmount, "%s must not be negative, got %s", field, amount.Amount)
	}
	return nil
}

// ValidateLockRef checks a collateral lock reference such as "market/lease/7".
func ValidateLockRef(ref string) error {
	switch {
	case ref == "":
		return errorsmod.Wrap(ErrInvalidLockRef, "ref must not be empty")
	case len(ref) > MaxLockRefLength:
		return errorsmod.Wrapf(ErrInvalidLockRef, "ref is %d bytes long, at most %d allowed", len(ref), MaxLockRefLength)
	case !utf8.ValidString(ref) || strings.ContainsFunc(ref, func(r rune) bool { return unicode.IsSpace(r) || unicode.IsControl(r) }):
		return errorsmod.Wrapf(ErrInvalidLockRef, "ref %q must be valid UTF-8 without spaces or control characters", ref)
	}
	return nil
}
