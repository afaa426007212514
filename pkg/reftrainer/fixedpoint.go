package reftrainer

import (
	"fmt"
	"math"
	"math/bits"
)

// FracBits is the number of fractional bits of the Q16.16 format used for
// every weight, activation, gradient and loss value in this package.
const FracBits = 16

// One is 1.0 in Q16.16.
const One int32 = 1 << FracBits

// q30 is the number of fractional bits used inside exp and ln. The extra
// 14 bits over Q16.16 keep polynomial rounding error far below one Q16.16
// unit, so the results are correctly rounded or within one unit.
const q30 = 30

// oneQ30 is 1.0 in Q2.30.
const oneQ30 int64 = 1 << q30

// ln2Q30 is ln 2 in Q2.30: round(0.693147180559945309 × 2^30).
const ln2Q30 int64 = 744261118

// expDegree is the degree of the Taylor polynomial for e^r on r in [0, ln 2).
// The truncation error, ln2^8/8! ≈ 1.3e-6, is below 0.1 Q16.16 unit.
const expDegree = 7

// expMACs is the multiply count of one expQ16 call: k·ln2 for the range
// reduction and one multiply per Horner step. It does not depend on the input,
// which keeps the per-step MAC count data independent.
const expMACs = 1 + expDegree

// lnSeriesTerms is the number of odd-power terms of the atanh series used for
// ln m, m in [1, 2): ln m = 2·(s + s^3/3 + ... + s^9/9) with s = (m-1)/(m+1)
// in [0, 1/3). The truncation error is about 1.2e-6.
const lnSeriesTerms = 5

// lnMACs is the multiply/divide count of one lnQ16 call: the division forming
// s, s², one multiply per Horner step, the final 2·s·p and k·ln2.
const lnMACs = 1 + 1 + (lnSeriesTerms - 1) + 1 + 1

// expTaylorQ30[n] is round(2^30 / n!). The coefficients are derived with
// integer arithmetic at start-up rather than typed in, so there is nothing
// to mistype.
var expTaylorQ30 = func() [expDegree + 1]int64 {
	var c [expDegree + 1]int64
	factorial := int64(1)
	for n := range c {
		if n > 0 {
			factorial *= int64(n)
		}
		c[n] = divRound(oneQ30, factorial)
	}
	return c
}()

// atanhSeriesQ30[i] is round(2^30 / (2i+1)).
var atanhSeriesQ30 = func() [lnSeriesTerms]int64 {
	var c [lnSeriesTerms]int64
	for i := range c {
		c[i] = divRound(oneQ30, int64(2*i+1))
	}
	return c
}()

// roundShift returns v / 2^n rounded to the nearest integer, ties away from
// zero, for n in [1, 62]. It cannot overflow: the arithmetic shift floors,
// and the discarded low bits decide whether to step up by one.
func roundShift(v int64, n uint) int64 {
	q := v >> n
	rem := v & (int64(1)<<n - 1)
	half := int64(1) << (n - 1)
	if rem > half || (rem == half && v >= 0) {
		q++
	}
	return q
}

// divRound returns num / den rounded to the nearest integer, ties away from
// zero. den must be positive. Go's / truncates toward zero on every
// platform, so this is as deterministic as the rest of the step.
func divRound(num, den int64) int64 {
	q := num / den
	r := num % den
	if r < 0 {
		if -r >= den+r { // 2|r| >= den, written without overflow
			q--
		}
	} else if r >= den-r {
		q++
	}
	return q
}

// floorDiv returns floor(num / den) for positive den.
func floorDiv(num, den int64) int64 {
	q := num / den
	if num%den < 0 {
		q--
	}
	return q
}

// saturate32 narrows v to int32, clamping instead of wrapping so that an
// overflow degrades the model rather than flipping its sign.
func saturate32(v int64) int32 {
	if v > math.MaxInt32 {
		return math.MaxInt32
	}
	if v < math.MinInt32 {
		return math.MinInt32
	}
	return int32(v)
}

// addSat64 returns a+b clamped to the int64 range. Accumulators use it so that
// a pathological (but valid) state saturates identically everywhere instead
// of relying on wrap-around.
func addSat64(a, b int64) int64 {
	s := a + b
	if (s > a) != (b > 0) {
		if b > 0 {
			return math.MaxInt64
		}
		return math.MinInt64
	}
	return s
}

// mulQ16 returns the Q16.16 product a·b, rounded half away from zero and
// saturated.
func mulQ16(a, b int32) int32 {
	return saturate32(roundShift(int64(a)*int64(b), FracBits))
}

// subQ16 returns a-b saturated to int32.
func subQ16(a, b int32) int32 {
	return saturate32(int64(a) - int64(b))
}

// expQ16 returns e^x for Q16.16 x, as Q16.16 rounded half away from zero.
// x is split as k·ln2 + r with integer k and r in [0, ln 2); e^r comes from a
// degree-7 Taylor polynomial in Q2.30 (a value in [1, 2)) which is then
// scaled by 2^k. Results below half a unit round to 0 and results of 32768
// or more saturate to math.MaxInt32. The error is within one Q16.16 unit for
// results below 1 and within about 1e-6 relative above.
func expQ16(x int32) int32 {
	xq := int64(x) << (q30 - FracBits)
	k := floorDiv(xq, ln2Q30)
	r := xq - k*ln2Q30
	p := expTaylorQ30[expDegree]
	for n := expDegree - 1; n >= 0; n-- {
		p = expTaylorQ30[n] + roundShift(p*r, q30)
	}
	// e^x = p · 2^k with p in Q2.30; moving to Q16.16 shifts by k - 14.
	shift := k - (q30 - FracBits)
	switch {
	case shift > 0: // p >= 2^30, so p·2^shift >= 2^31: beyond int32.
		return math.MaxInt32
	case shift == 0:
		return saturate32(p)
	case shift < -40: // p < 2^31, so p/2^41 < 1/2 rounds to zero.
		return 0
	default:
		return saturate32(roundShift(p, uint(-shift)))
	}
}

// lnQ16 returns the natural logarithm of Q16.16 x, as Q16.16 rounded half
// away from zero, within one Q16.16 unit. x is split as m·2^k with m in
// [1, 2); ln m comes from the atanh series in Q2.30. For x <= 0 it returns
// math.MinInt32, the saturated -infinity.
func lnQ16(x int32) int32 {
	if x <= 0 {
		return math.MinInt32
	}
	n := bits.Len32(uint32(x)) // x in [2^(n-1), 2^n)
	m := int64(x) << (31 - n)  // mantissa in [1, 2) as Q2.30
	k := int64(n - 1 - FracBits)
	s := divRound((m-oneQ30)<<q30, m+oneQ30)
	s2 := roundShift(s*s, q30)
	p := atanhSeriesQ30[lnSeriesTerms-1]
	for i := lnSeriesTerms - 2; i >= 0; i-- {
		p = atanhSeriesQ30[i] + roundShift(p*s2, q30)
	}
	lnM := roundShift(s*p, q30-1) // 2·s·p
	return saturate32(roundShift(k*ln2Q30+lnM, q30-FracBits))
}

// FormatQ16 renders a Q16.16 value as a decimal with six fractional digits
// (rounded half away from zero), e.g. for logging losses without floats.
func FormatQ16(v int32) string {
	magnitude := int64(v)
	sign := ""
	if magnitude < 0 {
		magnitude, sign = -magnitude, "-"
	}
	millionths := divRound(magnitude*1_000_000, int64(One))
	return fmt.Sprintf("%s%d.%06d", sign, millionths/1_000_000, millionths%1_000_000)
}
