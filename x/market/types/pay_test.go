package types_test

import (
	"math/big"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"cosmossdk.io/math"

	"github.com/depinchain/depinchain/x/market/types"
)

// PayForSteps is price × gpus × steps ÷ rate rounded down, exactly, for amounts far past
// 64 bits; the pay for a range telescopes, so per-checkpoint rounding never adds up.
func TestPayForStepsIsExactAndTelescopes(t *testing.T) {
	price := math.NewIntFromBigInt(new(big.Int).Exp(big.NewInt(10), big.NewInt(30), nil)) // MaxPricePerGPUHour
	got := types.PayForSteps(price, 64, 7, 1<<40)
	want := new(big.Int).Mul(price.BigInt(), big.NewInt(64))
	want.Mul(want, big.NewInt(1<<40)).Quo(want, big.NewInt(7))
	require.Equal(t, want.String(), got.String())

	require.True(t, types.PayForSteps(math.NewInt(1237), 2, 0, 100).IsZero(), "no rate, no pay")
	require.True(t, types.PayForSteps(math.NewInt(1237), 2, 100, 0).IsZero())
	sum := math.ZeroInt()
	for step := uint64(0); step < 1000; step += 7 {
		next := min(step+7, 1000)
		sum = sum.Add(types.PayForSteps(math.NewInt(1237), 2, 300, next).Sub(types.PayForSteps(math.NewInt(1237), 2, 300, step)))
	}
	require.Equal(t, types.PayForSteps(math.NewInt(1237), 2, 300, 1000), sum)
}

func TestCheaperPerStepComparesExactly(t *testing.T) {
	require.True(t, types.CheaperPerStep(math.NewInt(3000), 200, math.NewInt(1000), 50), "15 < 20 per step")
	require.False(t, types.CheaperPerStep(math.NewInt(1000), 50, math.NewInt(2000), 100), "equal: neither is cheaper")
	require.False(t, types.CheaperPerStep(math.NewInt(2000), 100, math.NewInt(1000), 50))
	// 0.333333333333333333 against 1/3: a decimal with 18 digits could not tell them apart.
	require.True(t, types.CheaperPerStep(math.NewInt(333_333_333_333_333_333), 1_000_000_000_000_000_000, math.NewInt(1), 3))
	require.Equal(t, types.PricePerStep(math.NewInt(333_333_333_333_333_333), 1, 1_000_000_000_000_000_000), types.PricePerStep(math.NewInt(1), 1, 3))
}

func TestValidateRateNamesWhatIsWrong(t *testing.T) {
	require.ErrorIs(t, types.ValidateRate(0, 10, time.Hour), types.ErrInvalidRate)
	require.ErrorIs(t, types.ValidateRate(types.MaxStepsPerHour+1, 10, time.Hour), types.ErrInvalidRate)
	err := types.ValidateRate(41, 1000, 24*time.Hour)
	require.ErrorIs(t, err, types.ErrRateTooLow)
	require.Contains(t, err.Error(), "41 steps per hour complete 984 steps in max_duration 24h0m0s, and 1000 steps remain")
	require.NoError(t, types.ValidateRate(42, 1000, 24*time.Hour))
	require.NoError(t, types.ValidateRate(1, 0, time.Hour), "nothing left to do")
}

func TestConservativeRateIsTheSlowestThatFinishes(t *testing.T) {
	for _, tc := range []struct {
		steps uint64
		d     time.Duration
	}{{1000, 24 * time.Hour}, {1, time.Hour}, {7, 90 * time.Minute}, {1 << 40, time.Hour}, {3600, time.Hour}} {
		r := types.ConservativeRate(tc.steps, tc.d)
		if r < types.MaxStepsPerHour {
			require.NoError(t, types.ValidateRate(r, tc.steps, tc.d), "%d steps in %s at %d", tc.steps, tc.d, r)
			if r > 1 {
				require.Error(t, types.ValidateRate(r-1, tc.steps, tc.d), "%d steps in %s: %d is not the slowest", tc.steps, tc.d, r)
			}
		}
	}
	require.Equal(t, uint64(42), types.ConservativeRate(1000, 24*time.Hour))
	require.Equal(t, uint64(types.MaxStepsPerHour), types.ConservativeRate(1<<60, time.Second))
}
