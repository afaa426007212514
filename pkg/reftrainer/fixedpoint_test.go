package reftrainer

import (
	"math"
	"testing"
)

// Float64 appears only in tests, as an independent reference.

func TestRoundShiftTiesAwayFromZero(t *testing.T) {
	cases := []struct {
		v    int64
		n    uint
		want int64
	}{
		{3, 1, 2},   // 1.5
		{-3, 1, -2}, // -1.5
		{1, 1, 1},   // 0.5
		{-1, 1, -1}, // -0.5
		{5, 2, 1},   // 1.25
		{-5, 2, -1}, // -1.25
		{7, 2, 2},   // 1.75
		{-7, 2, -2}, // -1.75
		{6, 2, 2},   // 1.5
		{-6, 2, -2}, // -1.5
		{0, 16, 0},
		{math.MaxInt64, 1, 1 << 62},
		{math.MinInt64, 1, -1 << 62},
		{math.MaxInt64, 62, 2},
	}
	for _, c := range cases {
		if got := roundShift(c.v, c.n); got != c.want {
			t.Errorf("roundShift(%d, %d) = %d, want %d", c.v, c.n, got, c.want)
		}
	}
}

func TestDivRound(t *testing.T) {
	cases := []struct{ num, den, want int64 }{
		{7, 2, 4},
		{-7, 2, -4},
		{5, 3, 2},
		{-5, 3, -2},
		{4, 3, 1},
		{-4, 3, -1},
		{0, 5, 0},
		{10, 5, 2},
		{math.MaxInt64, 1, math.MaxInt64},
		{math.MinInt64, 2, math.MinInt64 / 2},
	}
	for _, c := range cases {
		if got := divRound(c.num, c.den); got != c.want {
			t.Errorf("divRound(%d, %d) = %d, want %d", c.num, c.den, got, c.want)
		}
	}
}

func TestFloorDiv(t *testing.T) {
	cases := []struct{ num, den, want int64 }{{7, 2, 3}, {-7, 2, -4}, {-8, 2, -4}, {0, 3, 0}}
	for _, c := range cases {
		if got := floorDiv(c.num, c.den); got != c.want {
			t.Errorf("floorDiv(%d, %d) = %d, want %d", c.num, c.den, got, c.want)
		}
	}
}

func TestSaturation(t *testing.T) {
	if got := saturate32(1 << 40); got != math.MaxInt32 {
		t.Errorf("saturate32(2^40) = %d", got)
	}
	if got := saturate32(-1 << 40); got != math.MinInt32 {
		t.Errorf("saturate32(-2^40) = %d", got)
	}
	if got := saturate32(-12345); got != -12345 {
		t.Errorf("saturate32(-12345) = %d", got)
	}
	if got := addSat64(math.MaxInt64, 1); got != math.MaxInt64 {
		t.Errorf("addSat64(max, 1) = %d", got)
	}
	if got := addSat64(math.MinInt64, -1); got != math.MinInt64 {
		t.Errorf("addSat64(min, -1) = %d", got)
	}
	if got := addSat64(math.MaxInt64, math.MinInt64); got != -1 {
		t.Errorf("addSat64(max, min) = %d", got)
	}
	if got := addSat64(-5, 3); got != -2 {
		t.Errorf("addSat64(-5, 3) = %d", got)
	}
	if got := subQ16(math.MinInt32, 1); got != math.MinInt32 {
		t.Errorf("subQ16(min, 1) = %d", got)
	}
}

func TestMulQ16(t *testing.T) {
	cases := []struct{ a, b, want int32 }{
		{One, One, One},
		{One / 2, One / 2, One / 4},
		{3 * One, -One / 2, -3 * One / 2},
		{1, One / 2, 1},   // 0.5 unit rounds away from zero
		{-1, One / 2, -1}, // -0.5 unit rounds away from zero
		{1, One/2 - 1, 0}, // just under half a unit
		{3, One / 4, 1},   // 0.75 unit
		{math.MaxInt32, 2 * One, math.MaxInt32},
		{math.MinInt32, 2 * One, math.MinInt32},
		{math.MinInt32, -One, math.MaxInt32},
	}
	for _, c := range cases {
		if got := mulQ16(c.a, c.b); got != c.want {
			t.Errorf("mulQ16(%d, %d) = %d, want %d", c.a, c.b, got, c.want)
		}
	}
}

func TestConstantsMatchFloatReference(t *testing.T) {
	if want := int64(math.Round(math.Ln2 * (1 << q30))); ln2Q30 != want {
		t.Errorf("ln2Q30 = %d, want %d", ln2Q30, want)
	}
	factorial := 1.0
	for n, c := range expTaylorQ30 {
		if n > 0 {
			factorial *= float64(n)
		}
		if want := int64(math.Round((1 << q30) / factorial)); c != want {
			t.Errorf("expTaylorQ30[%d] = %d, want %d", n, c, want)
		}
	}
	for i, c := range atanhSeriesQ30 {
		if want := int64(math.Round((1 << q30) / float64(2*i+1))); c != want {
			t.Errorf("atanhSeriesQ30[%d] = %d, want %d", i, c, want)
		}
	}
}

// TestExpQ16Accuracy sweeps the whole useful input range: the error is at
// most one Q16.16 unit where e^x < 1 (every softmax input) and at most
// 1e-6 relative (plus one unit) above.
func TestExpQ16Accuracy(t *testing.T) {
	if got := expQ16(0); got != One {
		t.Fatalf("expQ16(0) = %d, want exactly One", got)
	}
	maxErr := 0.0
	for x := int64(-20 * One); x <= 11*int64(One); x += 97 {
		got := expQ16(int32(x))
		ref := math.Exp(float64(x)/float64(One)) * float64(One)
		if ref >= math.MaxInt32 {
			if got != math.MaxInt32 {
				t.Fatalf("expQ16(%d) = %d, want saturation", x, got)
			}
			continue
		}
		tolerance := 1 + ref*1e-6
		diff := math.Abs(float64(got) - ref)
		if diff > tolerance {
			t.Fatalf("expQ16(%d) = %d, float64 reference %.3f, error %.3f > %.3f", x, got, ref, diff, tolerance)
		}
		if x <= 0 {
			maxErr = max(maxErr, diff)
		}
	}
	t.Logf("max |error| for x <= 0: %.3f Q16.16 units", maxErr)
	if got := expQ16(math.MinInt32); got != 0 {
		t.Errorf("expQ16(min) = %d, want 0", got)
	}
	if got := expQ16(math.MaxInt32); got != math.MaxInt32 {
		t.Errorf("expQ16(max) = %d, want saturation", got)
	}
}

// TestLnQ16Accuracy checks the error is at most one Q16.16 unit over the
// whole positive int32 range.
func TestLnQ16Accuracy(t *testing.T) {
	if got := lnQ16(One); got != 0 {
		t.Fatalf("lnQ16(One) = %d, want 0", got)
	}
	for _, x := range []int32{0, -1, math.MinInt32} {
		if got := lnQ16(x); got != math.MinInt32 {
			t.Errorf("lnQ16(%d) = %d, want MinInt32", x, got)
		}
	}
	check := func(x int32) {
		got := lnQ16(x)
		ref := math.Log(float64(x)/float64(One)) * float64(One)
		if diff := math.Abs(float64(got) - ref); diff > 1 {
			t.Fatalf("lnQ16(%d) = %d, float64 reference %.3f, error %.3f > 1", x, got, ref, diff)
		}
	}
	for x := int32(1); x < 4*One; x += 7 {
		check(x)
	}
	for x := int64(4 * One); x <= math.MaxInt32; x = x*1001/1000 + 1 {
		check(int32(x))
	}
	check(math.MaxInt32)
}

func TestFormatQ16(t *testing.T) {
	cases := []struct {
		v    int32
		want string
	}{
		{0, "0.000000"},
		{One, "1.000000"},
		{-One / 2, "-0.500000"},
		{One + 1, "1.000015"},
		{math.MaxInt32, "32767.999985"},
		{math.MinInt32, "-32768.000000"},
		{One - 1, "0.999985"},
	}
	for _, c := range cases {
		if got := FormatQ16(c.v); got != c.want {
			t.Errorf("FormatQ16(%d) = %q, want %q", c.v, got, c.want)
		}
	}
}
