package exact

import (
	"fmt"
	"math/big"
)

// Source gives a kernel read access to its operator's inputs one row at a
// time: Row(i, r) is row r of input i in its Rows()×Cols() view. The full
// executor backs it with whole tensors; a referee backs it with the rows it
// was given Merkle proofs for (see Needs).
type Source interface {
	Row(input, row int) []int64
}

// Need is a rectangle of one input, in its Rows()×Cols() view, that an
// output region depends on: rows [Row0, Row1), columns [Col0, Col1).
type Need struct {
	Input      int
	Row0, Row1 int
	Col0, Col1 int
}

// kctx is what a kernel sees: the operator, its tensor specs and a Source.
type kctx struct {
	op  *Op
	in  []*TensorSpec
	out *TensorSpec
	src Source
}

// A kernel computes any rectangle of its operator's output view:
// eval writes rows [r0, r1) × columns [c0, c1) to dst with row stride
// stride; needs lists the input rectangles that region reads (src, when
// not nil, may be consulted for data-dependent addresses: embed's token
// rows). The full-tensor executor and the chunk evaluator both call eval,
// so there is one implementation of each operator's arithmetic.
type kernel struct {
	eval  func(k *kctx, r0, r1, c0, c1 int, dst []int64, stride int)
	needs func(k *kctx, r0, r1, c0, c1 int) []Need
}

var kernels = map[string]kernel{
	KindQExp:         {evalQExp, needsRowsOfCols(0)},
	KindQMant:        {evalQMant, needsQMant},
	KindMatmul:       {evalMatmul, needsMatmul},
	KindTranspose:    {evalTranspose, needsTranspose},
	KindEmbed:        {evalEmbed, needsEmbed},
	KindRMSScale:     {evalRMSScale, needsWholeRows(0)},
	KindRMSApply:     {evalRMSApply, needsWholeRows(0, 1)},
	KindRMSBackward:  {evalRMSBackward, needsWholeRows(0, 1, 2)},
	KindSplitHeads:   {evalSplitHeads, needsSplitHeads},
	KindMergeHeads:   {evalMergeHeads, needsMergeHeads},
	KindSoftmax:      {evalSoftmax, needsWholeRows(0)},
	KindSoftmaxBack:  {evalSoftmaxBack, needsWholeRows(0, 1)},
	KindCELoss:       {evalCELoss, needsCE},
	KindCEGrad:       {evalCEGrad, needsCE},
	KindSum:          {evalSum, needsAll(0)},
	KindAdd:          {evalAdd, needsSame(0, 1)},
	KindReLU:         {evalReLU, needsSame(0)},
	KindReLUBack:     {evalReLUBack, needsSame(0, 1)},
	KindEmbedGradTok: {evalEmbedGradTok, needsEmbedGradTok},
	KindEmbedGradPos: {evalEmbedGradPos, needsEmbedGradPos},
	KindSchedule:     {evalSchedule, needsAll(0)},
	KindAdamM:        {evalAdamM, needsSame(0, 1)},
	KindAdamV:        {evalAdamV, needsSame(0, 1)},
	KindAdamW:        {evalAdamW, needsAdamW},
	KindLossMean:     {evalLossMean, needsAll(0)},
}

// --- generic dependency shapes -------------------------------------------

// needsSame: elementwise over inputs of the output's shape.
func needsSame(inputs ...int) func(*kctx, int, int, int, int) []Need {
	return func(_ *kctx, r0, r1, c0, c1 int) []Need {
		ns := make([]Need, len(inputs))
		for i, in := range inputs {
			ns[i] = Need{in, r0, r1, c0, c1}
		}
		return ns
	}
}

// needsWholeRows: output row r reads all of row r of each input.
func needsWholeRows(inputs ...int) func(*kctx, int, int, int, int) []Need {
	return func(k *kctx, r0, r1, _, _ int) []Need {
		ns := make([]Need, len(inputs))
		for i, in := range inputs {
			ns[i] = Need{in, r0, r1, 0, k.in[in].Cols()}
		}
		return ns
	}
}

// needsRowsOfCols: output view [1, R]; column c reads all of input row c.
func needsRowsOfCols(in int) func(*kctx, int, int, int, int) []Need {
	return func(k *kctx, _, _, c0, c1 int) []Need {
		return []Need{{in, c0, c1, 0, k.in[in].Cols()}}
	}
}

func needsAll(inputs ...int) func(*kctx, int, int, int, int) []Need {
	return func(k *kctx, _, _, _, _ int) []Need {
		ns := make([]Need, len(inputs))
		for i, in := range inputs {
			ns[i] = Need{in, 0, k.in[in].Rows(), 0, k.in[in].Cols()}
		}
		return ns
	}
}

// --- quantization -----------------------------------------------------------

// qShift is the smallest s ≥ 0 with RS(a, s) ≤ MaxQ for a = max |x| ≥ 0.
func qShift(a int64) int {
	s := max(0, BitLen(a)-15)
	if RS(a, s) > MaxQ {
		s++
	}
	return s
}

// qexp: e[r] = qShift(max_c |x[r,c]|) - frac. Output view [1, R].
func evalQExp(k *kctx, r0, r1, c0, c1 int, dst []int64, stride int) {
	frac := int(k.op.Attr("frac"))
	for c := c0; c < c1; c++ {
		var a int64
		for _, v := range k.src.Row(0, c) {
			a = max(a, v, -v)
		}
		dst[c-c0] = int64(qShift(a) - frac)
	}
}

// qmant: q[r,c] = RS(x[r,c], e[r] + frac).
func evalQMant(k *kctx, r0, r1, c0, c1 int, dst []int64, stride int) {
	frac := int64(k.op.Attr("frac"))
	e := k.src.Row(1, 0)
	for r := r0; r < r1; r++ {
		x := k.src.Row(0, r)
		s := int(e[r] + frac)
		d := dst[(r-r0)*stride:]
		for c := c0; c < c1; c++ {
			d[c-c0] = RS(x[c], s)
		}
	}
}

func needsQMant(k *kctx, r0, r1, c0, c1 int) []Need {
	return []Need{{0, r0, r1, c0, c1}, {1, 0, 1, r0, r1}}
}

// --- matmul -----------------------------------------------------------------

// mmDims returns G, M, N, K of C = A·Bᵀ.
func mmDims(k *kctx) (G, M, N, K int) {
	s := k.out.Shape
	if len(s) == 3 {
		G, M, N = s[0], s[1], s[2]
	} else {
		G, M, N = 1, s[0], s[1]
	}
	return G, M, N, k.in[0].Cols()
}

// requant converts an exact accumulator worth acc·2^(ea+eb) to frac
// fractional bits, rounded by RS and saturated to [-bound, bound].
func requant(acc int64, ea, eb int64, frac int, bound int64) int64 {
	n := -(int(ea) + int(eb) + frac)
	if n >= 0 {
		return Clamp(RS(acc, n), bound)
	}
	// Left shift by -n: saturate first so the shift cannot overflow.
	if acc == 0 {
		return 0
	}
	if -n >= 62 || acc > bound>>uint(-n) || acc < -(bound>>uint(-n)) {
		if acc > 0 {
			return bound
		}
		return -bound
	}
	return acc << uint(-n)
}

// dot returns Σ a[i]·b[i] exactly (|a|,|b| ≤ 32767, len < 2^23).
func dot(a, b []int64) int64 {
	b = b[:len(a)]
	var s0, s1, s2, s3 int64
	i := 0
	for ; i+4 <= len(a); i += 4 {
		s0 += a[i] * b[i]
		s1 += a[i+1] * b[i+1]
		s2 += a[i+2] * b[i+2]
		s3 += a[i+3] * b[i+3]
	}
	for ; i < len(a); i++ {
		s0 += a[i] * b[i]
	}
	return s0 + s1 + s2 + s3
}

// dot2x2 returns the four dot products of a0, a1 with b0, b1, sharing the
// loads (exact integer sums, so blocking changes no result).
func dot2x2(a0, a1, b0, b1 []int64) (s00, s01, s10, s11 int64) {
	n := len(a0)
	a1, b0, b1 = a1[:n], b0[:n], b1[:n]
	for k := range n {
		x0, x1, y0, y1 := a0[k], a1[k], b0[k], b1[k]
		s00 += x0 * y0
		s01 += x0 * y1
		s10 += x1 * y0
		s11 += x1 * y1
	}
	return
}

// matmul: C[g,m,n] = requant(Σ_k A[g,m,k]·B[g,n,k], Ae[g,m], Be[g,n]).
// Inputs: A.q, A.e, B.q, B.e. Output view: rows g·M+m, columns n. Pairs of
// rows of one group and pairs of columns are computed together.
func evalMatmul(k *kctx, r0, r1, c0, c1 int, dst []int64, stride int) {
	_, M, N, _ := mmDims(k)
	frac, bound := int(k.op.Attr("frac")), k.op.Attr("bound")
	ae, be := k.src.Row(1, 0), k.src.Row(3, 0)
	brows := make([][]int64, c1-c0)
	lastG := -1
	for r := r0; r < r1; {
		g := r / M
		if g != lastG {
			for n := c0; n < c1; n++ {
				brows[n-c0] = k.src.Row(2, g*N+n)
			}
			lastG = g
		}
		a0, ea0 := k.src.Row(0, r), ae[r]
		d0 := dst[(r-r0)*stride:]
		if r+1 < r1 && (r+1)/M == g {
			a1, ea1 := k.src.Row(0, r+1), ae[r+1]
			d1 := dst[(r+1-r0)*stride:]
			n := c0
			for ; n+1 < c1; n += 2 {
				s00, s01, s10, s11 := dot2x2(a0, a1, brows[n-c0], brows[n+1-c0])
				eb0, eb1 := be[g*N+n], be[g*N+n+1]
				d0[n-c0] = requant(s00, ea0, eb0, frac, bound)
				d0[n+1-c0] = requant(s01, ea0, eb1, frac, bound)
				d1[n-c0] = requant(s10, ea1, eb0, frac, bound)
				d1[n+1-c0] = requant(s11, ea1, eb1, frac, bound)
			}
			if n < c1 {
				d0[n-c0] = requant(dot(a0, brows[n-c0]), ea0, be[g*N+n], frac, bound)
				d1[n-c0] = requant(dot(a1, brows[n-c0]), ea1, be[g*N+n], frac, bound)
			}
			r += 2
			continue
		}
		for n := c0; n < c1; n++ {
			d0[n-c0] = requant(dot(a0, brows[n-c0]), ea0, be[g*N+n], frac, bound)
		}
		r++
	}
}

func needsMatmul(k *kctx, r0, r1, c0, c1 int) []Need {
	_, M, N, K := mmDims(k)
	ns := []Need{{0, r0, r1, 0, K}, {1, 0, 1, r0, r1}}
	for g := r0 / M; g <= (r1-1)/M; g++ {
		ns = append(ns, Need{2, g*N + c0, g*N + c1, 0, K}, Need{3, 0, 1, g*N + c0, g*N + c1})
	}
	return ns
}

// --- layout -----------------------------------------------------------------

// trDims returns G, M, N for a transpose of input [G,]M×N.
func trDims(k *kctx) (G, M, N int) {
	s := k.in[0].Shape
	if len(s) == 3 {
		return s[0], s[1], s[2]
	}
	return 1, s[0], s[1]
}

// transpose: out[g,n,m] = in[g,m,n]. Output view rows g·N+n, columns m.
func evalTranspose(k *kctx, r0, r1, c0, c1 int, dst []int64, stride int) {
	_, M, N := trDims(k)
	rows := make([][]int64, c1-c0)
	lastG := -1
	for r := r0; r < r1; r++ {
		g, n := r/N, r%N
		if g != lastG {
			for m := c0; m < c1; m++ {
				rows[m-c0] = k.src.Row(0, g*M+m)
			}
			lastG = g
		}
		d := dst[(r-r0)*stride:]
		for m := c0; m < c1; m++ {
			d[m-c0] = rows[m-c0][n]
		}
	}
}

func needsTranspose(k *kctx, r0, r1, c0, c1 int) []Need {
	_, M, N := trDims(k)
	var ns []Need
	for g := r0 / N; g <= (r1-1)/N; g++ {
		n0, n1 := max(r0, g*N)-g*N, min(r1, (g+1)*N)-g*N
		ns = append(ns, Need{0, g*M + c0, g*M + c1, n0, n1})
	}
	return ns
}

// split_heads: input [B·T, P·D] (part p of P), output [B·H, T, dh]:
// out[b·H+h, t, d] = in[b·T+t, p·D + h·dh + d].
func evalSplitHeads(k *kctx, r0, r1, c0, c1 int, dst []int64, stride int) {
	H, T, off, dh := splitDims(k)
	for r := r0; r < r1; r++ {
		g, t := r/T, r%T
		b, h := g/H, g%H
		src := k.src.Row(0, b*T+t)[off+h*dh:]
		copy(dst[(r-r0)*stride:(r-r0)*stride+c1-c0], src[c0:c1])
	}
}

func splitDims(k *kctx) (H, T, off, dh int) {
	H, T = int(k.op.Attr("heads")), int(k.op.Attr("seq"))
	P, p := int(k.op.Attr("parts")), int(k.op.Attr("part"))
	D := k.in[0].Cols() / P
	return H, T, p * D, D / H
}

func needsSplitHeads(k *kctx, r0, r1, c0, c1 int) []Need {
	H, T, off, dh := splitDims(k)
	ns := make([]Need, 0, r1-r0)
	for r := r0; r < r1; r++ {
		g, t := r/T, r%T
		b, h := g/H, g%H
		ns = append(ns, Need{0, b*T + t, b*T + t + 1, off + h*dh + c0, off + h*dh + c1})
	}
	return ns
}

// merge_heads: inputs y_0..y_{P-1}, each [B·H, T, dh]; output [B·T, P·D]:
// out[b·T+t, p·D + h·dh + d] = y_p[b·H+h, t, d].
func evalMergeHeads(k *kctx, r0, r1, c0, c1 int, dst []int64, stride int) {
	H, T, D, dh := mergeDims(k)
	for r := r0; r < r1; r++ {
		b, t := r/T, r%T
		d := dst[(r-r0)*stride:]
		for c := c0; c < c1; {
			p, h, e := c/D, (c%D)/dh, c%dh
			n := min(c1-c, dh-e)
			copy(d[c-c0:c-c0+n], k.src.Row(p, (b*H+h)*T+t)[e:e+n])
			c += n
		}
	}
}

func mergeDims(k *kctx) (H, T, D, dh int) {
	H = int(k.op.Attr("heads"))
	T, dh = k.in[0].Shape[1], k.in[0].Shape[2]
	return H, T, H * dh, dh
}

func needsMergeHeads(k *kctx, r0, r1, c0, c1 int) []Need {
	H, T, D, dh := mergeDims(k)
	var ns []Need
	for r := r0; r < r1; r++ {
		b, t := r/T, r%T
		for c := c0; c < c1; {
			p, h, e := c/D, (c%D)/dh, c%dh
			n := min(c1-c, dh-e)
			row := (b*H+h)*T + t
			ns = append(ns, Need{p, row, row + 1, e, e + n})
			c += n
		}
	}
	return ns
}

// --- embedding --------------------------------------------------------------

// embed: inputs window [B, T+1], tok_emb [V, D], pos_emb [C, D]; output
// [B·T, D]: x[b·T+t, c] = clamp32(RS(tok[w[b,t], c] + pos[t, c], 12)).
func evalEmbed(k *kctx, r0, r1, c0, c1 int, dst []int64, stride int) {
	T := k.in[0].Cols() - 1
	for r := r0; r < r1; r++ {
		b, t := r/T, r%T
		tok := k.src.Row(1, int(k.src.Row(0, b)[t]))
		pos := k.src.Row(2, t)
		d := dst[(r-r0)*stride:]
		for c := c0; c < c1; c++ {
			d[c-c0] = Clamp32(RS(tok[c]+pos[c], FracW-FracAct))
		}
	}
}

func needsEmbed(k *kctx, r0, r1, c0, c1 int) []Need {
	T := k.in[0].Cols() - 1
	var ns []Need
	for r := r0; r < r1; r++ {
		b, t := r/T, r%T
		ns = append(ns, Need{0, b, b + 1, t, t + 1}, Need{2, t, t + 1, c0, c1})
		if k.src != nil {
			if w := k.src.Row(0, b); w != nil {
				v := int(w[t])
				ns = append(ns, Need{1, v, v + 1, c0, c1})
			}
		}
	}
	return ns
}

// embed_grad_tok: inputs window [B, T+1], dxT [D, B·T]; output [V, D]:
// out[v, c] = clamp(Σ_{b,t<T : w[b,t]=v} dxT[c, b·T+t], MaxGradPart).
func evalEmbedGradTok(k *kctx, r0, r1, c0, c1 int, dst []int64, stride int) {
	B, T := k.in[0].Rows(), k.in[0].Cols()-1
	for r := r0; r < r1; r++ {
		clear(dst[(r-r0)*stride : (r-r0)*stride+c1-c0])
	}
	for c := c0; c < c1; c++ {
		x := k.src.Row(1, c)
		for b := range B {
			w := k.src.Row(0, b)
			for t := range T {
				if v := int(w[t]); v >= r0 && v < r1 {
					dst[(v-r0)*stride+c-c0] += x[b*T+t]
				}
			}
		}
	}
	for r := r0; r < r1; r++ {
		d := dst[(r-r0)*stride:]
		for c := c0; c < c1; c++ {
			d[c-c0] = Clamp(d[c-c0], MaxGradPart)
		}
	}
}

func needsEmbedGradTok(k *kctx, _, _, c0, c1 int) []Need {
	return []Need{{0, 0, k.in[0].Rows(), 0, k.in[0].Cols()}, {1, c0, c1, 0, k.in[1].Cols()}}
}

// embed_grad_pos: input dxT [D, B·T] (attr seq = T); output [C, D]:
// out[t, c] = clamp(Σ_b dxT[c, b·T+t], MaxGradPart) for t < T, 0 for t ≥ T.
func evalEmbedGradPos(k *kctx, r0, r1, c0, c1 int, dst []int64, stride int) {
	T := k.out.Rows()
	B := k.in[0].Cols() / T
	for c := c0; c < c1; c++ {
		x := k.src.Row(0, c)
		for t := r0; t < r1; t++ {
			var s int64
			for b := range B {
				s += x[b*T+t]
			}
			dst[(t-r0)*stride+c-c0] = Clamp(s, MaxGradPart)
		}
	}
}

func needsEmbedGradPos(k *kctx, _, _, c0, c1 int) []Need {
	return []Need{{0, c0, c1, 0, k.in[0].Cols()}}
}

// --- RMSNorm ------------------------------------------------------------------

// rmsStats returns (inv, s, k) of a row: a = max|x|, s = max(0,
// bitlen(a)-24), u = DIV(Σ RS(x,s)², D) + RS(eps, 2s), k = floor((60 -
// bitlen(u))/2), U = u·4^k (RS(u, -2k) when k < 0), R = ISqrt(U),
// inv = DIV(2^60, R). Then 1/rms = inv·2^(k - s - 44) in units of x.
func rmsStats(x []int64, eps int64) (inv, s, kk int64) {
	var a int64
	for _, v := range x {
		a = max(a, v, -v)
	}
	sh := max(0, BitLen(a)-24)
	var ss int64
	for _, v := range x {
		y := RS(v, sh)
		ss += y * y
	}
	u := DIV(ss, int64(len(x))) + RS(eps, 2*sh)
	k := FloorDiv(int64(60-BitLen(u)), 2)
	U := RS(u, int(-2*k))
	R := ISqrt(U)
	return DIV(1<<60, R), int64(sh), k
}

// rms_scale: output [R, 3] = (inv, s, k) per row of x (attr eps: Q32).
func evalRMSScale(k *kctx, r0, r1, c0, c1 int, dst []int64, stride int) {
	eps := k.op.Attr("eps")
	for r := r0; r < r1; r++ {
		inv, s, kk := rmsStats(k.src.Row(0, r), eps)
		v := [3]int64{inv, s, kk}
		copy(dst[(r-r0)*stride:(r-r0)*stride+c1-c0], v[c0:c1])
	}
}

// rms_apply: y = clamp32(RS(x·inv, 44 - k + s)) (Q16 in, Q16 out).
func evalRMSApply(k *kctx, r0, r1, c0, c1 int, dst []int64, stride int) {
	for r := r0; r < r1; r++ {
		x, st := k.src.Row(0, r), k.src.Row(1, r)
		inv, n := st[0], int(44-st[2]+st[1])
		d := dst[(r-r0)*stride:]
		for c := c0; c < c1; c++ {
			d[c-c0] = Clamp32(RS(x[c]*inv, n))
		}
	}
}

// rms_backward: inputs dy (Q24), y (Q16, the forward output), scale;
// μ = clamp32(DIV(Σ dy·y, D·2^16)); t = clamp32(dy - RS(y·μ, 16));
// dx = clamp32(RS(t·inv, 44 + s - k)).
func evalRMSBackward(k *kctx, r0, r1, c0, c1 int, dst []int64, stride int) {
	D := int64(k.in[0].Cols())
	for r := r0; r < r1; r++ {
		dy, y, st := k.src.Row(0, r), k.src.Row(1, r), k.src.Row(2, r)
		var s int64
		for c := range dy {
			s += dy[c] * y[c]
		}
		mu := Clamp32(DIV(s, D<<16))
		inv, n := st[0], int(44+st[1]-st[2])
		d := dst[(r-r0)*stride:]
		for c := c0; c < c1; c++ {
			t := Clamp32(dy[c] - RS(y[c]*mu, 16))
			d[c-c0] = Clamp32(RS(t*inv, n))
		}
	}
}

// --- softmax ----------------------------------------------------------------

// softmax: S [G, T, T] (Q16) → P (Q30), causal: row (g, i) uses j ≤ i;
// z_j = RS(S_j·scale, 30); m = max z; e_j = Exp(z_j - m); Z = Σ e_j;
// P_j = DIV(e_j·2^30, Z) for j ≤ i, 0 for j > i.
func evalSoftmax(k *kctx, r0, r1, c0, c1 int, dst []int64, stride int) {
	T := k.in[0].Cols()
	scale := k.op.Attr("scale")
	e := make([]int64, T)
	for r := r0; r < r1; r++ {
		i := r % T
		S := k.src.Row(0, r)
		m := int64(-1 << 62)
		for j := 0; j <= i; j++ {
			e[j] = RS(S[j]*scale, 30)
			m = max(m, e[j])
		}
		var Z int64
		for j := 0; j <= i; j++ {
			e[j] = Exp(e[j] - m)
			Z += e[j]
		}
		d := dst[(r-r0)*stride:]
		for c := c0; c < c1; c++ {
			if c <= i {
				d[c-c0] = DIV(e[c]<<30, Z)
			} else {
				d[c-c0] = 0
			}
		}
	}
}

// softmax_backward: P (Q30), dP (Q24) → dS (Q24): ρ = RS(Σ_{j≤i} P_j·dP_j,
// 30); dS_j = clamp32(RS(RS(P_j·clamp32(dP_j - ρ), 30)·scale, 30)) for j ≤ i,
// 0 for j > i.
func evalSoftmaxBack(k *kctx, r0, r1, c0, c1 int, dst []int64, stride int) {
	T := k.in[0].Cols()
	scale := k.op.Attr("scale")
	for r := r0; r < r1; r++ {
		i := r % T
		P, dP := k.src.Row(0, r), k.src.Row(1, r)
		var s int64
		for j := 0; j <= i; j++ {
			s += P[j] * dP[j]
		}
		rho := RS(s, 30)
		d := dst[(r-r0)*stride:]
		for c := c0; c < c1; c++ {
			if c <= i {
				dz := RS(P[c]*Clamp32(dP[c]-rho), 30)
				d[c-c0] = Clamp32(RS(dz*scale, 30))
			} else {
				d[c-c0] = 0
			}
		}
	}
}

// --- cross-entropy --------------------------------------------------------

// ceRow returns, for a logits row, m = max, e_j = Exp(l_j - m) and Z = Σ e_j.
func ceRow(l []int64, e []int64) (m, Z int64) {
	m = l[0]
	for _, v := range l {
		m = max(m, v)
	}
	for j, v := range l {
		e[j] = Exp(v - m)
		Z += e[j]
	}
	return m, Z
}

func ceTarget(k *kctx, r int) int {
	T := k.in[1].Cols() - 1
	return int(k.src.Row(1, r/T)[r%T+1])
}

// ce_loss: logits [R, V] (Q16), window → loss [R] (Q30), output view
// [1, R]: loss_r = clamp(Ln(Z) - (l_y - m)·2^14, 0, MaxLossTok).
func evalCELoss(k *kctx, r0, r1, c0, c1 int, dst []int64, stride int) {
	e := make([]int64, k.in[0].Cols())
	for r := c0; r < c1; r++ {
		l := k.src.Row(0, r)
		m, Z := ceRow(l, e)
		loss := Ln(Z) - (l[ceTarget(k, r)]-m)<<(FracProb-FracAct)
		dst[r-c0] = min(max(loss, 0), MaxLossTok)
	}
}

// ce_grad: dlogits[r, j] = RS(DIV(e_j·2^30, Z) - [j = y]·2^30, 6) (Q24).
func evalCEGrad(k *kctx, r0, r1, c0, c1 int, dst []int64, stride int) {
	e := make([]int64, k.in[0].Cols())
	for r := r0; r < r1; r++ {
		_, Z := ceRow(k.src.Row(0, r), e)
		y := ceTarget(k, r)
		d := dst[(r-r0)*stride:]
		for j := c0; j < c1; j++ {
			p := DIV(e[j]<<30, Z)
			if j == y {
				p -= one30
			}
			d[j-c0] = RS(p, FracProb-FracGrad)
		}
	}
}

func needsCE(k *kctx, r0, r1, c0, c1 int) []Need {
	rows0, rows1 := r0, r1
	if k.op.Kind == KindCELoss { // output view [1, R]: columns are rows
		rows0, rows1 = c0, c1
	}
	T := k.in[1].Cols() - 1
	return []Need{{0, rows0, rows1, 0, k.in[0].Cols()}, {1, rows0 / T, (rows1-1)/T + 1, 0, T + 1}}
}

// sum: the exact sum of every element (bounded by the inputs' ranges).
func evalSum(k *kctx, r0, r1, c0, c1 int, dst []int64, stride int) {
	var s int64
	for r := range k.in[0].Rows() {
		for _, v := range k.src.Row(0, r) {
			s += v
		}
	}
	dst[0] = s
}

// --- elementwise ------------------------------------------------------------

// add: clamp(a + b, bound).
func evalAdd(k *kctx, r0, r1, c0, c1 int, dst []int64, stride int) {
	bound := k.op.Attr("bound")
	for r := r0; r < r1; r++ {
		a, b, d := k.src.Row(0, r), k.src.Row(1, r), dst[(r-r0)*stride:]
		for c := c0; c < c1; c++ {
			d[c-c0] = Clamp(a[c]+b[c], bound)
		}
	}
}

func evalReLU(k *kctx, r0, r1, c0, c1 int, dst []int64, stride int) {
	for r := r0; r < r1; r++ {
		a, d := k.src.Row(0, r), dst[(r-r0)*stride:]
		for c := c0; c < c1; c++ {
			d[c-c0] = max(a[c], 0)
		}
	}
}

// relu_backward: dy where x > 0, else 0.
func evalReLUBack(k *kctx, r0, r1, c0, c1 int, dst []int64, stride int) {
	for r := r0; r < r1; r++ {
		dy, x, d := k.src.Row(0, r), k.src.Row(1, r), dst[(r-r0)*stride:]
		for c := c0; c < c1; c++ {
			if x[c] > 0 {
				d[c-c0] = dy[c]
			} else {
				d[c-c0] = 0
			}
		}
	}
}

// --- optimizer ----------------------------------------------------------------

// PowQ30 returns b^t at Q30 by binary exponentiation from the least
// significant bit: r ← RS(r·b, 30) for each set bit, b ← RS(b·b, 30).
func PowQ30(b, t int64) int64 {
	r := one30
	for ; t > 0; t >>= 1 {
		if t&1 == 1 {
			r = RS(r*b, 30)
		}
		b = RS(b*b, 30)
	}
	return r
}

// Schedule returns the step scalars for update number t = step+1 (see
// schedLen): lr_t by warm-up and decay, δ = RS(lr_t·wd, 40),
// a = DIV(lr_t·2^40, 2^30 - β1^t), k2 = DIV(2^54, ISqrt((2^30 - β2^t)·2^30)).
// Products beyond int64 are exact (arbitrary precision) integers.
func Schedule(h Hyper, step int64) [schedLen]int64 {
	return schedule(step, h.LR, h.MinLR, h.WarmupSteps, h.DecaySteps, h.WeightDecay, h.Beta1, h.Beta2)
}

func schedule(step, lr, minLR, warmup, decay, wd, beta1, beta2 int64) [schedLen]int64 {
	t := step + 1
	B := big.NewInt
	bigDIV := func(a, b *big.Int) int64 { // floor((2a+b)/(2b))
		num := new(big.Int).Add(new(big.Int).Lsh(a, 1), b)
		return new(big.Int).Div(num, new(big.Int).Lsh(b, 1)).Int64() // Div floors for b > 0
	}
	var lrT int64
	switch {
	case warmup > 0 && t <= warmup:
		lrT = bigDIV(new(big.Int).Mul(B(lr), B(t)), B(warmup))
	case decay > 0 && t >= decay:
		lrT = minLR
	case decay > 0:
		lrT = minLR + bigDIV(new(big.Int).Mul(B(lr-minLR), B(decay-t)), B(decay-warmup))
	default:
		lrT = lr
	}
	// δ = RS(lr_t·wd, 40) = floor((lr_t·wd + 2^39) / 2^40).
	prod := new(big.Int).Mul(B(lrT), B(wd))
	delta := new(big.Int).Rsh(prod.Add(prod, new(big.Int).Lsh(B(1), 39)), 40).Int64()
	bc1 := one30 - PowQ30(beta1, t)
	a := bigDIV(new(big.Int).Lsh(B(lrT), 40), B(bc1))
	bc2 := one30 - PowQ30(beta2, t)
	k2 := DIV(1<<54, ISqrt(bc2<<30))
	return [schedLen]int64{delta, a, k2, lrT}
}

func evalSchedule(k *kctx, r0, r1, c0, c1 int, dst []int64, stride int) {
	a := func(key string) int64 { return k.op.Attr(key) }
	s := schedule(k.src.Row(0, 0)[0], a("lr"), a("min_lr"), a("warmup"), a("decay"), a("weight_decay"), a("beta1"), a("beta2"))
	copy(dst[:c1-c0], s[c0:c1])
}

// meanGrad returns clamp32(DIV(16·acc, N)): the accumulated gradient (Q24,
// summed over N tokens) as a mean at Q28. Computed as 16q + DIV(16r, N)
// with acc' = clamp(acc, 2^58) = qN + r, which is the same integer (beyond
// 2^58 both saturate) and never overflows.
func meanGrad(acc, n int64) int64 {
	q, r := floorDivMod(Clamp(acc, 1<<58), n)
	return Clamp32(16*q + DIV(16*r, n))
}

// adam_m: m' = clamp32(m + RS((g - m)·c1, 30)), g = meanGrad(acc, tokens).
func evalAdamM(k *kctx, r0, r1, c0, c1 int, dst []int64, stride int) {
	n, c1q := k.op.Attr("tokens"), k.op.Attr("c1")
	for r := r0; r < r1; r++ {
		m, acc, d := k.src.Row(0, r), k.src.Row(1, r), dst[(r-r0)*stride:]
		for c := c0; c < c1; c++ {
			g := meanGrad(acc[c], n)
			d[c-c0] = Clamp32(m[c] + RS((g-m[c])*c1q, 30))
		}
	}
}

// adam_v: v' = clamp(v + MulShift(g² - v, c2, 30), 0, 2^62 - 1) (Q56).
func evalAdamV(k *kctx, r0, r1, c0, c1 int, dst []int64, stride int) {
	n, c2q := k.op.Attr("tokens"), k.op.Attr("c2")
	for r := r0; r < r1; r++ {
		v, acc, d := k.src.Row(0, r), k.src.Row(1, r), dst[(r-r0)*stride:]
		for c := c0; c < c1; c++ {
			g := meanGrad(acc[c], n)
			d[c-c0] = min(max(v[c]+MulShift(g*g-v[c], c2q, 30), 0), 1<<62-1)
		}
	}
}

// adam_w: inputs w, m', v', sched. w₁ = w - RS(w·δ, 30); d = RS(ISqrt(v')·k2,
// 24) + eps; u = clamp32(DIV(m'·2^24, d)); w' = clamp32(w₁ - MulShift(a, u, 46)).
func evalAdamW(k *kctx, r0, r1, c0, c1 int, dst []int64, stride int) {
	eps := k.op.Attr("eps")
	sched := k.src.Row(3, 0)
	delta, a, k2 := sched[0], sched[1], sched[2]
	for r := r0; r < r1; r++ {
		w, m, v, d := k.src.Row(0, r), k.src.Row(1, r), k.src.Row(2, r), dst[(r-r0)*stride:]
		for c := c0; c < c1; c++ {
			w1 := w[c] - RS(w[c]*delta, 30)
			den := RS(ISqrt(v[c])*k2, 24) + eps
			u := Clamp32(DIV(m[c]<<24, den))
			d[c-c0] = Clamp32(w1 - MulShift(a, u, 46))
		}
	}
}

func needsAdamW(k *kctx, r0, r1, c0, c1 int) []Need {
	return []Need{{0, r0, r1, c0, c1}, {1, r0, r1, c0, c1}, {2, r0, r1, c0, c1}, {3, 0, 1, 0, schedLen}}
}

// loss_mean: DIV(Σ loss, tokens).
func evalLossMean(k *kctx, r0, r1, c0, c1 int, dst []int64, stride int) {
	dst[0] = DIV(k.src.Row(0, 0)[0], k.op.Attr("tokens"))
}

func kernelFor(kind string) kernel {
	kn, ok := kernels[kind]
	if !ok {
		panic(fmt.Sprintf("exact: no kernel for %q", kind))
	}
	return kn
}
