package exact

import (
	"math"
	"math/bits"
)

// The scalar arithmetic of docs/exact-arithmetic.md, section "Primitives".
// Every function here is a mathematical function of its integer arguments;
// the PyTorch implementation (torch/exact/arith.py) computes the same
// integers with int64 tensor operations. Callers keep arguments inside the
// documented domains; the kernels' range analysis guarantees that.

// Fixed-point formats (number of fractional bits) of the tensor classes.
const (
	FracAct  = 16 // forward activations, logits, attention scores
	FracGrad = 24 // activation gradients and weight-gradient accumulators
	FracProb = 30 // softmax probabilities, per-token losses, exp/ln internals
	FracW    = 28 // weights, the mean gradient and Adam's first moment
	FracV    = 56 // Adam's second moment
)

// Saturation bounds.
const (
	// Max32 bounds every "s32" tensor: values lie in [-Max32, Max32], so the
	// product of two of them fits int64 (< 2^62).
	Max32 = math.MaxInt32 // 2^31 - 1
	// MaxGradPart bounds one micro-batch's weight-gradient contribution, so
	// the sum over at most 2^15 micro-batches stays below 2^62.
	MaxGradPart = 1<<47 - 1
	// MaxQ bounds int16 contraction operands (symmetric).
	MaxQ = 32767
	// MaxLossTok bounds one token's loss (value 1024 nats at FracProb).
	MaxLossTok = 1<<40 - 1
)

// one30 is 1.0 at FracProb.
const one30 = int64(1) << 30

// ln2Q30 is round(ln 2 · 2^30).
const ln2Q30 int64 = 744261118

// RS is the one rounding rule: v / 2^n rounded to nearest, ties toward +∞,
// i.e. floor((v + 2^(n-1)) / 2^n) for n ≥ 1, v for n = 0 and v·2^-n for
// n < 0 (callers guarantee no overflow). For n ≥ 63 the result is
// floor(v/2^n + 1/2), which is 0 for |v| < 2^62. It never overflows for
// n ≥ 1.
func RS(v int64, n int) int64 {
	switch {
	case n == 0:
		return v
	case n < 0:
		return v << uint(-n)
	case n >= 63:
		return 0 // callers keep |v| < 2^62 ≤ 2^(n-1)
	}
	return ((v >> uint(n-1)) + 1) >> 1
}

// DIV is division rounded to nearest, ties toward +∞: floor((2a + b) / (2b))
// for b > 0. Computed without overflow for any int64 a and b in (0, 2^62].
func DIV(a, b int64) int64 {
	// a = q·b + r with 0 ≤ r < b (floored division), then
	// floor((2a+b)/(2b)) = q + floor((2r+b)/(2b)) = q + [2r ≥ b].
	q, r := floorDivMod(a, b)
	if r >= b-r {
		q++
	}
	return q
}

// floorDivMod returns floor(a/b) and a - b·floor(a/b) for b > 0.
func floorDivMod(a, b int64) (int64, int64) {
	q, r := a/b, a%b
	if r < 0 {
		q--
		r += b
	}
	return q, r
}

// FloorDiv returns floor(a / b) for b > 0.
func FloorDiv(a, b int64) int64 {
	q, _ := floorDivMod(a, b)
	return q
}

// ISqrt returns floor(√v) for v ≥ 0.
func ISqrt(v int64) int64 {
	if v <= 0 {
		return 0
	}
	const maxRoot = 3037000499 // floor(√(2^63-1))
	x := min(int64(math.Sqrt(float64(v))), maxRoot)
	// float64 rounding leaves x within one of the answer; fix it exactly.
	for x*x > v {
		x--
	}
	for x < maxRoot && (x+1)*(x+1) <= v {
		x++
	}
	return x
}

// BitLen returns the number of bits of |v| (0 for 0); v > math.MinInt64.
func BitLen(v int64) int {
	if v < 0 {
		v = -v
	}
	return bits.Len64(uint64(v))
}

// Clamp returns v limited to [-m, m].
func Clamp(v, m int64) int64 {
	if v > m {
		return m
	}
	if v < -m {
		return -m
	}
	return v
}

// Clamp32 returns v limited to [-Max32, Max32].
func Clamp32(v int64) int64 { return Clamp(v, Max32) }

// MulShift returns RS(a·c, n) computed exactly without a 128-bit product,
// for |a| < 2^62, |c| < 2^31 and 1 ≤ n ≤ 62, when the result fits int64.
// a is split as ah·2^31 + al with 0 ≤ al < 2^31 (ah = a >> 31); then
//
//	n ≥ 31: RS(a·c, n) = (ah·c + ((al·c + 2^(n-1)) >> 31)) >> (n-31)
//	n < 31: RS(a·c, n) = ah·c·2^(31-n) + ((al·c + 2^(n-1)) >> n)
//
// (floor of a floor divided by a power of two is the floor of the whole).
func MulShift(a, c int64, n int) int64 {
	ah := a >> 31
	al := a & (1<<31 - 1)
	half := int64(1) << uint(n-1)
	if n >= 31 {
		return (ah*c + ((al*c + half) >> 31)) >> uint(n-31)
	}
	return ah*c<<uint(31-n) + ((al*c + half) >> uint(n))
}

// expDegree is the degree of the Taylor polynomial of e^r on [0, ln 2):
// the truncation error r^10/10! < 7e-9 is below 8 units of 2^-30.
const expDegree = 9

// expCoef[n] = DIV(2^30, n!), n = 0..9: the Taylor coefficients of e^r.
var expCoef = func() [expDegree + 1]int64 {
	var c [expDegree + 1]int64
	f := int64(1)
	for n := range c {
		if n > 0 {
			f *= int64(n)
		}
		c[n] = DIV(one30, f)
	}
	return c
}()

// lnTerms is the number of terms of the atanh series: with s ≤ 1/3 the
// truncation error 2·s^17/17 < 1e-9 is below 2 units of 2^-30.
const lnTerms = 8

// lnCoef[i] = DIV(2^30, 2i+1), i = 0..7: the atanh series of ln.
var lnCoef = func() [lnTerms]int64 {
	var c [lnTerms]int64
	for i := range c {
		c[i] = DIV(one30, int64(2*i+1))
	}
	return c
}()

// expPoly is the polynomial exponential that generates Exp's tables:
// e^(d/2^16) at FracProb for d ≤ 0 (d ≥ -2^47) by range reduction
// x = d·2^14 = k·L + r with L = round(ln2·2^30), k = floor(x/L), r in [0, L);
// p = Horner(c9..c0) with p ← c_n + RS(p·r, 30); result RS(p, -k), which is
// 0 once -k ≥ 33. Result in [0, 2^30].
func expPoly(d int64) int64 {
	x := d << (FracProb - FracAct)
	k, r := floorDivMod(x, ln2Q30)
	p := expCoef[expDegree]
	for n := expDegree - 1; n >= 0; n-- {
		p = expCoef[n] + RS(p*r, 30)
	}
	sh := -k
	if sh >= 40 {
		return 0
	}
	return RS(p, int(sh))
}

// The tables of Exp: expT1[a] = expPoly(-a·2^16) for a = 0..31 (the entries
// from 22 on are 0), expT2[b] = expPoly(-b·2^8) and expT3[c] = expPoly(-c)
// for b, c = 0..255.
var expT1, expT2, expT3 = func() (t1 [32]int64, t2, t3 [256]int64) {
	for i := range t1 {
		t1[i] = expPoly(-int64(i) << 16)
	}
	for i := range t2 {
		t2[i] = expPoly(-int64(i) << 8)
		t3[i] = expPoly(-int64(i))
	}
	return
}()

// Exp returns e^(d/2^16) at FracProb for d ≤ 0: with u = -d split into
// a = min(u >> 16, 31), b = (u >> 8) & 255, c = u & 255,
// Exp(d) = RS(RS(T1[a]·T2[b], 30)·T3[c], 30). Result in [0, 2^30], within a
// few units of 2^-30 of e^(d/2^16); three lookups instead of a polynomial,
// so that it costs a dozen tensor operations instead of fifty.
func Exp(d int64) int64 {
	u := -d
	a := min(u>>16, 31)
	return RS(RS(expT1[a]*expT2[(u>>8)&255], 30)*expT3[u&255], 30)
}

// Ln returns ln(z/2^30) at FracProb for 2^30 ≤ z < 2^62: n = bitlen(z),
// μ = RS(z, n-31) in [2^30, 2^31] (so z ≈ μ·2^(n-31)), s = DIV((μ-2^30)·2^30,
// μ+2^30), s2 = RS(s², 30), p = Horner(a7..a0) with p ← a_i + RS(p·s2, 30),
// result RS(s·p, 29) + (n-31)·L.
func Ln(z int64) int64 {
	n := BitLen(z)
	mu := RS(z, n-31)
	s := DIV((mu-one30)<<30, mu+one30)
	s2 := RS(s*s, 30)
	p := lnCoef[lnTerms-1]
	for i := lnTerms - 2; i >= 0; i-- {
		p = lnCoef[i] + RS(p*s2, 30)
	}
	return RS(s*p, 29) + int64(n-31)*ln2Q30
}
