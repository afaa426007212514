package exact

import (
	"math"
	"math/big"
	"math/rand/v2"
	"testing"

	"github.com/stretchr/testify/require"
)

// bigRS is RS computed with arbitrary precision: floor((v + 2^(n-1)) / 2^n).
func bigRS(v *big.Int, n int) *big.Int {
	if n == 0 {
		return new(big.Int).Set(v)
	}
	x := new(big.Int).Add(v, new(big.Int).Lsh(big.NewInt(1), uint(n-1)))
	return x.Rsh(x, uint(n)) // Rsh floors for negative numbers too
}

func TestRSRoundsHalfUp(t *testing.T) {
	cases := []struct {
		v    int64
		n    int
		want int64
	}{
		{5, 1, 3}, {-5, 1, -2}, {4, 1, 2}, {3, 1, 2}, {-3, 1, -1}, {-4, 1, -2},
		{7, 2, 2}, {6, 2, 2}, {-6, 2, -1}, {-7, 2, -2}, {0, 10, 0}, {9, 0, 9}, {3, -2, 12},
		{math.MaxInt64, 62, 2}, {math.MinInt64 + 1, 62, -2}, {1 << 61, 62, 1}, {-(1 << 61), 62, 0},
		{1 << 40, 63, 0}, {-(1 << 40), 70, 0},
	}
	for _, c := range cases {
		require.Equal(t, c.want, RS(c.v, c.n), "RS(%d, %d)", c.v, c.n)
	}
	r := rand.New(rand.NewPCG(1, 2))
	for range 20000 {
		v := int64(r.Uint64())
		n := 1 + r.IntN(62)
		require.Equal(t, bigRS(big.NewInt(v), n).Int64(), RS(v, n), "RS(%d, %d)", v, n)
	}
}

func TestDIVRoundsHalfUpWithoutOverflow(t *testing.T) {
	cases := []struct{ a, b, want int64 }{
		{7, 2, 4}, {-7, 2, -3}, {5, 2, 3}, {-5, 2, -2}, {1, 3, 0}, {2, 3, 1}, {-2, 3, -1}, {0, 5, 0},
		{math.MaxInt64, 1, math.MaxInt64}, {math.MaxInt64, 2, 1 << 62}, {math.MinInt64 + 1, 1 << 62, -2},
	}
	for _, c := range cases {
		require.Equal(t, c.want, DIV(c.a, c.b), "DIV(%d, %d)", c.a, c.b)
	}
	r := rand.New(rand.NewPCG(3, 4))
	for range 20000 {
		a := int64(r.Uint64())
		b := 1 + int64(r.Uint64()>>(2+r.IntN(60)))
		num := new(big.Int).Add(new(big.Int).Lsh(big.NewInt(a), 1), big.NewInt(b))
		want := new(big.Int).Div(num, big.NewInt(2*b)) // Euclidean = floor for b > 0
		require.Equal(t, want.Int64(), DIV(a, b), "DIV(%d, %d)", a, b)
	}
}

func TestMulShiftIsExact(t *testing.T) {
	r := rand.New(rand.NewPCG(5, 6))
	for range 50000 {
		a := int64(r.Uint64()>>2) * int64(1-2*r.IntN(2)) // |a| < 2^62
		a >>= r.IntN(40)
		c := int64(r.Uint64()>>33) * int64(1-2*r.IntN(2)) // |c| < 2^31
		n := 1 + r.IntN(62)
		want := bigRS(new(big.Int).Mul(big.NewInt(a), big.NewInt(c)), n)
		if !want.IsInt64() {
			continue
		}
		require.Equal(t, want.Int64(), MulShift(a, c, n), "MulShift(%d, %d, %d)", a, c, n)
	}
	// The extremes of the domain.
	for _, a := range []int64{1<<62 - 1, -(1<<62 - 1), 1, -1, 0} {
		for _, c := range []int64{1<<31 - 1, -(1<<31 - 1), 1 << 30} {
			for _, n := range []int{31, 46, 62} {
				want := bigRS(new(big.Int).Mul(big.NewInt(a), big.NewInt(c)), n)
				require.Equal(t, want.Int64(), MulShift(a, c, n), "MulShift(%d, %d, %d)", a, c, n)
			}
		}
	}
}

func TestISqrtIsFloorSqrt(t *testing.T) {
	for _, v := range []int64{0, 1, 2, 3, 4, 15, 16, 17, 1<<62 - 1, 1 << 62, math.MaxInt64, 4611686014132420609, 4611686014132420608} {
		x := ISqrt(v)
		require.True(t, x*x <= v, "ISqrt(%d) = %d", v, x)
		require.True(t, x == 3037000499 || (x+1)*(x+1) > v, "ISqrt(%d) = %d", v, x)
	}
	r := rand.New(rand.NewPCG(7, 8))
	for range 20000 {
		v := int64(r.Uint64() >> (1 + r.IntN(62)))
		want := new(big.Int).Sqrt(big.NewInt(v)).Int64()
		require.Equal(t, want, ISqrt(v), "ISqrt(%d)", v)
	}
}

func TestBitLen(t *testing.T) {
	for _, c := range []struct {
		v    int64
		want int
	}{{0, 0}, {1, 1}, {-1, 1}, {2, 2}, {32767, 15}, {32768, 16}, {-32768, 16}, {math.MaxInt64, 63}} {
		require.Equal(t, c.want, BitLen(c.v), "BitLen(%d)", c.v)
	}
}

// Exp and Ln are accurate to a few units of 2^-30 over their domains, and
// saturate to 0 for very negative arguments.
func TestExpLnAccuracy(t *testing.T) {
	require.Equal(t, int64(1<<30), Exp(0))
	require.Equal(t, int64(0), Exp(-1<<40))
	require.Equal(t, int64(0), Exp(-(40 << 16)), "e^-40 is below 2^-31")
	worst, worstPoly := 0.0, 0.0
	for d := int64(0); d >= -30<<16; d -= 997 {
		want := math.Exp(float64(d)/65536) * (1 << 30)
		worst = max(worst, math.Abs(float64(Exp(d))-want))
		worstPoly = max(worstPoly, math.Abs(float64(expPoly(d))-want))
	}
	require.Less(t, worstPoly, 4.0, "polynomial exp error in units of 2^-30")
	require.Less(t, worst, 8.0, "table exp error in units of 2^-30")
	for _, d := range []int64{-1, -255, -256, -65535, -65536, -(21 << 16), -(22 << 16), -(1 << 32)} {
		require.InDelta(t, math.Exp(float64(d)/65536)*(1<<30), float64(Exp(d)), 8, "Exp(%d)", d)
	}
	require.Equal(t, int64(0), Ln(1<<30))
	worst = 0
	for z := int64(1 << 30); z < 300<<30; z += 123456789 {
		got := float64(Ln(z))
		want := math.Log(float64(z)/(1<<30)) * (1 << 30)
		worst = max(worst, math.Abs(got-want))
	}
	require.Less(t, worst, 16.0, "Ln error in units of 2^-30")
}

func TestPowQ30(t *testing.T) {
	require.Equal(t, int64(1<<30), PowQ30(fixed(0.9, 30), 0))
	require.Equal(t, fixed(0.9, 30), PowQ30(fixed(0.9, 30), 1))
	require.InDelta(t, math.Pow(0.95, 1000)*(1<<30), float64(PowQ30(fixed(0.95, 30), 1000)), 50)
	require.Equal(t, int64(0), PowQ30(fixed(0.5, 30), 40))
	require.Equal(t, int64(0), PowQ30(0, 3))
}

// --- kernel edge cases --------------------------------------------------

func TestQShiftBoundary(t *testing.T) {
	require.Equal(t, 0, qShift(0))
	require.Equal(t, 0, qShift(32767))
	require.Equal(t, 1, qShift(32768))
	// 65534 → RS(·,1) = 32767 fits; 65535 → RS = 32768 does not: one more bit.
	require.Equal(t, 1, qShift(65534))
	require.Equal(t, 2, qShift(65535))
	for _, a := range []int64{1, 100, 32767, 32768, 65535, 1 << 20, 1<<31 - 1, 1<<40 + 12345} {
		s := qShift(a)
		require.LessOrEqual(t, RS(a, s), int64(MaxQ))
		if s > 0 {
			require.Greater(t, RS(a, s-1), int64(MaxQ), "qShift(%d) = %d is not the smallest", a, s)
		}
	}
}

func TestRequantSaturates(t *testing.T) {
	require.Equal(t, int64(Max32), requant(1<<50, 0, 0, 0, Max32))
	require.Equal(t, int64(-Max32), requant(-(1<<50), 0, 0, 0, Max32))
	require.Equal(t, int64(3), requant(5, -1, 0, 0, Max32), "5/2 rounds half up")
	require.Equal(t, int64(-2), requant(-5, -1, 0, 0, Max32), "-5/2 rounds half up")
	// Left shifts (n < 0) saturate instead of overflowing.
	require.Equal(t, int64(40), requant(5, 1, 2, 0, Max32))
	require.Equal(t, int64(Max32), requant(1<<30, 1, 1, 0, Max32))
	require.Equal(t, int64(-Max32), requant(-3, 40, 40, 0, Max32))
	require.Equal(t, int64(0), requant(0, 40, 40, 0, Max32))
	require.Equal(t, int64(MaxGradPart), requant(1<<52, 5, 0, 0, MaxGradPart))
}

func TestRMSStatsOfZeroAndHugeRows(t *testing.T) {
	eps := fixed(1e-5, qNormEps)
	inv, s, k := rmsStats(make([]int64, 64), eps)
	require.Equal(t, int64(0), s)
	// 1/rms = inv·2^(k-s-44) (in value units); for a zero row it is 1/√eps.
	require.InDelta(t, 1/math.Sqrt(1e-5), float64(inv)*math.Pow(2, float64(k-s-44)), 0.01)
	row := make([]int64, 4096)
	for i := range row {
		row[i] = Max32 * int64(1-2*(i%2))
	}
	inv, s, k = rmsStats(row, eps)
	require.Equal(t, int64(7), s, "2^31 needs a shift of 7 to 24 bits")
	y := RS(row[0]*inv, int(44-k+s))
	require.InDelta(t, 65536, float64(y), 2, "x/rms of a constant-magnitude row is ±1")
}

func TestSoftmaxAndCEEdgeCases(t *testing.T) {
	// A row of one element (i = 0) is probability one.
	k := &kctx{op: &Op{Attrs: []Attr{{"scale", 1 << 30}}}, in: []*TensorSpec{{Shape: []int{1, 3, 3}}}}
	S := [][]int64{{5, 99, 99}, {0, 1 << 30, 0}, {-(1 << 31) + 1, 1<<31 - 1, 0}}
	k.src = fullSource{{Spec: k.in[0], Data: append(append(append([]int64{}, S[0]...), S[1]...), S[2]...)}}
	out := make([]int64, 9)
	evalSoftmax(k, 0, 3, 0, 3, out, 3)
	require.Equal(t, []int64{1 << 30, 0, 0}, out[:3])
	require.Equal(t, []int64{0, 1 << 30, 0}, out[3:6], "e^-16384 underflows to exactly 0")
	require.Equal(t, int64(0), out[6]+out[8])
	require.Equal(t, int64(1<<30), out[7])
	// Cross-entropy of a confident wrong prediction saturates at the cap
	// instead of overflowing; a certain right one costs 0.
	logits := make([]int64, 256)
	logits[7] = Max32
	logits[9] = -Max32
	e := make([]int64, 256)
	m, Z := ceRow(logits, e)
	require.Equal(t, int64(1<<30), Z)
	require.Equal(t, int64(0), Ln(Z)-(logits[7]-m)<<14)
	loss := Ln(Z) - (logits[9]-m)<<14
	require.Equal(t, int64(MaxLossTok), min(max(loss, 0), MaxLossTok))
}

func TestMeanGradSaturates(t *testing.T) {
	require.Equal(t, int64(16), meanGrad(1, 1))
	require.Equal(t, int64(8), meanGrad(1, 2))
	require.Equal(t, int64(1), meanGrad(1, 32), "0.5 rounds up")
	require.Equal(t, int64(0), meanGrad(-1, 32), "-0.5 rounds up")
	require.Equal(t, int64(Max32), meanGrad(1<<62-1, 4096))
	require.Equal(t, int64(-Max32), meanGrad(-(1<<62-1), 1))
	require.Equal(t, int64(Max32), meanGrad(1<<58, 1<<22))
}

func TestScheduleWarmupDecayAndBiasCorrection(t *testing.T) {
	cfg := Config{Model: ModelConfig{Layers: 1, DModel: 8, Heads: 1, DFF: 8, Context: 4, Vocab: 256},
		Train: TrainConfig{Batch: 1, LR: 0.01, WarmupSteps: 10, DecaySteps: 20, MinLR: 0.001, WeightDecay: 0.1}}
	h := cfg.Hyper()
	lr := func(step int64) float64 { return math.Ldexp(float64(Schedule(h, step)[3]), -qLR) }
	require.InDelta(t, 0.001, lr(0), 1e-12)
	require.InDelta(t, 0.01, lr(9), 1e-12)
	require.InDelta(t, 0.0055, lr(14), 1e-12)
	require.InDelta(t, 0.001, lr(19), 1e-12)
	require.InDelta(t, 0.001, lr(1000), 1e-12)
	s := Schedule(h, 0)
	require.InDelta(t, 0.001*0.1, math.Ldexp(float64(s[0]), -30), 1e-9)
	require.InDelta(t, 0.001/(1-0.9), math.Ldexp(float64(s[1]), -50), 1e-9)
	require.InDelta(t, 1/math.Sqrt(1-0.95), math.Ldexp(float64(s[2]), -24), 1e-6)
}
