"""One full-tensor torch function per operator kind, computing exactly the
integers of pkg/exact/kernels.go. Tensors are int64 whatever their canonical
dtype, except the int16 mantissas of contraction operands, which are held as
float64 (exact integers) for the float64 GEMMs; those are exact because every
partial sum is an integer multiple of one power of two below 2^50 of it (see
k_matmul)."""
import torch

from .arith import (DIV, FRAC_ACT, FRAC_GRAD, FRAC_PROB, FRAC_W, MAX32, MAX_GRAD_PART, MAX_LOSS_TOK,
                    MAXQ, ONE30, bitlen, clamp, clamp32, exp_q, floor_div, isqrt, ln_q, mulshift, rs,
                    rs_t, schedule)

I64 = torch.int64


def rows_view(t, spec):
    return t.reshape(spec.rows(), spec.cols())


def row_absmax(x):
    mn, mx = torch.aminmax(x, dim=1)
    return torch.maximum(mx, -mn)


def k_qexp(op, ins, specs, out):
    x = rows_view(ins[0], specs[0])
    a = row_absmax(x)
    s = (bitlen(a) - 15).clamp(min=0)
    # One more bit when RS(a, s) would round up to 32768, i.e. when s > 0 and
    # a >= 65535 * 2^(s-1) (a < 32768 * 2^s already).
    s = s + ((s > 0) & (a >= (torch.full_like(s, 65535) << (s - 1).clamp(min=0)))).to(I64)
    return s - op.attr("frac")


def pow2(e):
    """2^e as float64 for an int64 tensor e in [-1022, 1023], built from
    its bits (exact on every device, unlike pow)."""
    return ((e + 1023) << 52).view(torch.float64)


def k_qmant(op, ins, specs, out):
    # q = RS(x, s) with s = e + frac >= 0, computed as floor(x*2^-s + 1/2) in
    # float64: x is an s32 value, so x*2^-s and adding 1/2 are exact. The
    # mantissas stay float64 (exact integers), ready for the GEMM.
    x = rows_view(ins[0], specs[0]).to(torch.float64, copy=True)  # in-place below
    s = ins[1] + op.attr("frac")
    return x.mul_(pow2(-s).unsqueeze(1)).add_(0.5).floor_().reshape(out.shape)


def k_matmul(op, ins, specs, out):
    # C = RS(sum qa*qb, -(ea + eb + F)) clamped to +-bound, computed exactly in
    # float64: scaling the rows of A by 2^(ea+F) and of B by 2^eb makes every
    # product of one output element an integer multiple of the same power
    # of two, so the GEMM's sums stay exact (|sum| < 2^50) whatever their
    # order, and the sum is acc*2^(ea+eb+F). floor(C + 1/2) is then exactly
    # RS(acc, n): for n <= 52 the addition is exact, for n >= 53 |C| < 1/8 and
    # the result is 0 either way; beyond 2^52 the value saturates anyway.
    aq, ae, bq, be = ins
    frac, bound = op.attr("frac"), op.attr("bound")
    if len(out.shape) == 3:
        G, M, N = out.shape
        A = aq.reshape(G, M, -1) * pow2(ae.reshape(G, M, 1) + frac)
        B = bq.reshape(G, N, -1) * pow2(be.reshape(G, N, 1))
        C = torch.bmm(A, B.transpose(1, 2))
    else:
        A = aq * pow2(ae + frac).unsqueeze(1)
        B = bq * pow2(be).unsqueeze(1)
        C = torch.mm(A, B.t())
    return C.add_(0.5).floor_().clamp_(min=-bound, max=bound).to(I64)


def k_transpose(op, ins, specs, out):
    return ins[0].transpose(-1, -2).contiguous()


def k_embed(op, ins, specs, out):
    window, tok, pos = ins
    B, T1 = window.shape
    T = T1 - 1
    ids = window[:, :T].reshape(-1)
    x = tok[ids] + pos[:T].repeat(B, 1)
    return clamp32(rs(x, FRAC_W - FRAC_ACT))


def k_embed_grad_tok(op, ins, specs, out):
    window, dxT = ins
    B, T1 = window.shape
    ids = window[:, :T1 - 1].reshape(-1)
    res = torch.zeros(out.shape, dtype=I64, device=dxT.device)
    res.index_add_(0, ids, dxT.t())
    return clamp(res, MAX_GRAD_PART)


def k_embed_grad_pos(op, ins, specs, out):
    dxT = ins[0]
    T = out.shape[0]
    D, BT = dxT.shape
    return clamp(dxT.reshape(D, BT // T, T).sum(dim=1).t().contiguous(), MAX_GRAD_PART)


def rms_stats(x, eps):
    a = row_absmax(x)
    s = (bitlen(a) - 24).clamp(min=0)
    y = rs_t(x, s.unsqueeze(1))
    ss = (y * y).sum(dim=1)
    D = x.shape[1]
    u = DIV(ss, D) + rs_t(torch.full_like(s, eps), 2 * s)
    k = floor_div(60 - bitlen(u), 2)
    U = torch.where(k >= 0, u << (2 * k).clamp(min=0), rs_t(u, (-2 * k).clamp(min=0)))
    R = isqrt(U)
    inv = DIV(torch.full_like(R, 1 << 60), R)
    return inv, s, k


def k_rms_scale(op, ins, specs, out):
    inv, s, k = rms_stats(ins[0], op.attr("eps"))
    return torch.stack([inv, s, k], dim=1)


def k_rms_apply(op, ins, specs, out):
    x, st = ins
    inv, s, k = st[:, 0:1], st[:, 1:2], st[:, 2:3]
    return clamp32(rs_t(x * inv, 44 - k + s))


def k_rms_backward(op, ins, specs, out):
    dy, y, st = ins
    D = dy.shape[1]
    dot = (dy * y).sum(dim=1, keepdim=True)
    mu = clamp32(DIV(dot, D << 16))
    t = clamp32(dy - rs(y * mu, 16))
    inv, s, k = st[:, 0:1], st[:, 1:2], st[:, 2:3]
    return clamp32(rs_t(t * inv, 44 + s - k))


def split_dims(op, spec_in):
    H, T = op.attr("heads"), op.attr("seq")
    P, p = op.attr("parts"), op.attr("part")
    D = spec_in.cols() // P
    return H, T, P, p, D


def k_split_heads(op, ins, specs, out):
    H, T, P, p, D = split_dims(op, specs[0])
    x = ins[0]
    B = x.shape[0] // T
    dh = D // H
    y = x.reshape(B, T, P, H, dh)[:, :, p]
    return y.permute(0, 2, 1, 3).reshape(B * H, T, dh).contiguous()


def k_merge_heads(op, ins, specs, out):
    H = op.attr("heads")
    parts = []
    for y in ins:
        G, T, dh = y.shape
        B = G // H
        parts.append(y.reshape(B, H, T, dh).permute(0, 2, 1, 3).reshape(B * T, H * dh))
    return torch.cat(parts, dim=1).contiguous()


def causal_mask(T, device):
    i = torch.arange(T, device=device)
    return i.unsqueeze(0) <= i.unsqueeze(1)  # [i, j]: j <= i


def k_softmax(op, ins, specs, out):
    S = ins[0]
    T = S.shape[-1]
    mask = causal_mask(T, S.device)
    z = rs(S * op.attr("scale"), 30)
    m = torch.where(mask, z, torch.full_like(z, -(1 << 62))).amax(dim=-1, keepdim=True)
    e = torch.where(mask, exp_q(torch.where(mask, z - m, torch.zeros_like(z))), torch.zeros_like(z))
    Z = e.sum(dim=-1, keepdim=True)
    return torch.where(mask, DIV(e << 30, Z), torch.zeros_like(z))


def k_softmax_backward(op, ins, specs, out):
    P, dP = ins
    T = P.shape[-1]
    mask = causal_mask(T, P.device)
    s = (P * torch.where(mask, dP, torch.zeros_like(dP))).sum(dim=-1, keepdim=True)
    rho = rs(s, 30)
    dz = rs(P * clamp32(dP - rho), 30)
    return torch.where(mask, clamp32(rs(dz * op.attr("scale"), 30)), torch.zeros_like(dz))


def ce_parts(logits, window):
    B, T1 = window.shape
    y = window[:, 1:].reshape(-1)
    m = logits.amax(dim=1, keepdim=True)
    e = exp_q(logits - m)
    Z = e.sum(dim=1, keepdim=True)
    return y, m, e, Z


def k_ce_loss(op, ins, specs, out):
    logits, window = ins
    y, m, e, Z = ce_parts(logits, window)
    ly = logits.gather(1, y.unsqueeze(1))
    loss = ln_q(Z) - ((ly - m) << (FRAC_PROB - FRAC_ACT))
    return loss.reshape(-1).clamp(min=0, max=MAX_LOSS_TOK)


def k_ce_grad(op, ins, specs, out):
    logits, window = ins
    y, m, e, Z = ce_parts(logits, window)
    p = DIV(e << 30, Z)
    p = p - ONE30 * torch.nn.functional.one_hot(y, logits.shape[1]).to(I64)
    return rs(p, FRAC_PROB - FRAC_GRAD)


def k_sum(op, ins, specs, out):
    return ins[0].sum().reshape(1)


def k_add(op, ins, specs, out):
    return clamp(ins[0] + ins[1], op.attr("bound"))


def k_relu(op, ins, specs, out):
    return ins[0].clamp(min=0)


def k_relu_backward(op, ins, specs, out):
    dy, x = ins
    return torch.where(x > 0, dy, torch.zeros_like(dy))


def k_schedule(op, ins, specs, out):
    a = op.attr
    s = schedule(int(ins[0].reshape(-1)[0].item()), a("lr"), a("min_lr"), a("warmup"), a("decay"),
                 a("weight_decay"), a("beta1"), a("beta2"))
    return torch.tensor(s, dtype=I64, device=ins[0].device)


def mean_grad(acc, n):
    a = clamp(acc, 1 << 58)
    q = floor_div(a, n)
    r = a - q * n
    return clamp32(16 * q + DIV(16 * r, n))


def k_adam_m(op, ins, specs, out):
    m, acc = ins
    g = mean_grad(acc, op.attr("tokens"))
    return clamp32(m + rs((g - m) * op.attr("c1"), 30))


def k_adam_v(op, ins, specs, out):
    v, acc = ins
    g = mean_grad(acc, op.attr("tokens"))
    return (v + mulshift(g * g - v, op.attr("c2"), 30)).clamp(min=0, max=(1 << 62) - 1)


def k_adam_w(op, ins, specs, out):
    w, m, v, sched = ins
    delta, a, k2 = (int(x) for x in sched[:3].tolist())
    w1 = w - rs(w * delta, 30)
    den = rs(isqrt(v) * k2, 24) + op.attr("eps")
    u = clamp32(DIV(m << 24, den))
    return clamp32(w1 - mulshift(a, u, 46))


def k_loss_mean(op, ins, specs, out):
    return DIV(ins[0], op.attr("tokens"))


KERNELS = {
    "qexp": k_qexp, "qmant": k_qmant, "matmul": k_matmul, "transpose": k_transpose, "embed": k_embed,
    "rms_scale": k_rms_scale, "rms_apply": k_rms_apply, "rms_backward": k_rms_backward,
    "split_heads": k_split_heads, "merge_heads": k_merge_heads, "softmax": k_softmax,
    "softmax_backward": k_softmax_backward, "ce_loss": k_ce_loss, "ce_grad": k_ce_grad, "sum": k_sum,
    "add": k_add, "relu": k_relu, "relu_backward": k_relu_backward, "embed_grad_tok": k_embed_grad_tok,
    "embed_grad_pos": k_embed_grad_pos, "schedule": k_schedule, "adam_m": k_adam_m, "adam_v": k_adam_v,
    "adam_w": k_adam_w, "loss_mean": k_loss_mean,
}
