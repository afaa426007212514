"""The primitives of docs/exact-arithmetic.md on int64 torch tensors.

Every function returns exactly the integers the Go package computes
(pkg/exact/arith.go); the domains are the same (the kernels' range analysis
keeps every intermediate inside int64).
"""
import math

import torch

ONE30 = 1 << 30
LN2_Q30 = 744261118
MAX32 = (1 << 31) - 1
MAXQ = 32767
MAX_GRAD_PART = (1 << 47) - 1
MAX_LOSS_TOK = (1 << 40) - 1
MAX_ROOT = 3037000499  # floor(sqrt(2^63 - 1))

FRAC_ACT, FRAC_GRAD, FRAC_PROB, FRAC_W, FRAC_V = 16, 24, 30, 28, 56


def div_int(a: int, b: int) -> int:
    """DIV on Python ints: floor((2a + b) / (2b)), b > 0."""
    return (2 * a + b) // (2 * b)


def rs_int(v: int, n: int) -> int:
    """RS on Python ints."""
    if n == 0:
        return v
    if n < 0:
        return v << -n
    return (v + (1 << (n - 1))) >> n


def isqrt_int(v: int) -> int:
    return math.isqrt(v) if v > 0 else 0


def rs(v: torch.Tensor, n: int) -> torch.Tensor:
    """RS(v, n) for a Python int n (n >= 63 gives 0 for |v| < 2^62)."""
    if n == 0:
        return v
    if n < 0:
        return v << (-n)
    if n >= 63:
        return torch.zeros_like(v)
    return ((v >> (n - 1)) + 1) >> 1


def rs_t(v: torch.Tensor, n: torch.Tensor) -> torch.Tensor:
    """RS(v, n) for a tensor of shifts n >= 0 (shifts above 62 act as 62,
    which gives the same result for |v| < 2^61)."""
    n = n.clamp(max=62)
    shifted = ((v >> (n - 1).clamp(min=0)) + 1) >> 1
    return torch.where(n == 0, v, shifted)


def floor_div(a: torch.Tensor, b) -> torch.Tensor:
    return torch.div(a, b, rounding_mode="floor")


def DIV(a: torch.Tensor, b) -> torch.Tensor:
    """floor((2a + b) / (2b)) for b > 0, without overflow: a = qb + r."""
    q = floor_div(a, b)
    r = a - q * b
    return q + (r >= b - r).to(torch.int64)


def clamp(v: torch.Tensor, m: int) -> torch.Tensor:
    return v.clamp(min=-m, max=m)


def clamp32(v: torch.Tensor) -> torch.Tensor:
    return v.clamp(min=-MAX32, max=MAX32)


def bitlen(v: torch.Tensor) -> torch.Tensor:
    """Number of bits of |v| for |v| < 2^53 (every use: s32 values, sums of
    squares below 2^50, Z below 2^40): the float64 conversion is exact, so
    its biased exponent is bitlen + 1022 (and 0 maps to 0)."""
    e = (v.abs().to(torch.float64).view(torch.int64) >> 52) - 1022
    return e.clamp(min=0)


def isqrt(v: torch.Tensor) -> torch.Tensor:
    """floor(sqrt(v)) for 0 <= v < 2^62: a float64 guess, corrected exactly."""
    x = torch.sqrt(v.to(torch.float64)).to(torch.int64).clamp(min=0, max=MAX_ROOT)
    for _ in range(2):
        x = x - (x * x > v).to(torch.int64)
    for _ in range(2):
        x = x + ((x + 1) * (x + 1) <= v).to(torch.int64)
    return x


def mulshift(a, c, n: int) -> torch.Tensor:
    """RS(a*c, n) exactly, for |a| < 2^62, |c| < 2^31, 1 <= n <= 62
    (a or c may be a Python int; at least one is a tensor)."""
    if not torch.is_tensor(a):
        a = torch.full_like(c, a)
    ah = a >> 31
    al = a & ((1 << 31) - 1)
    half = 1 << (n - 1)
    if n >= 31:
        return (ah * c + ((al * c + half) >> 31)) >> (n - 31)
    return ((ah * c) << (31 - n)) + ((al * c + half) >> n)


EXP_DEGREE = 9
EXP_COEF = []
_f = 1
for _n in range(EXP_DEGREE + 1):
    if _n > 0:
        _f *= _n
    EXP_COEF.append(div_int(ONE30, _f))
LN_TERMS = 8
LN_COEF = [div_int(ONE30, 2 * i + 1) for i in range(LN_TERMS)]


def exp_poly_int(d: int) -> int:
    """The polynomial exponential that generates exp_q's tables (Python ints)."""
    x = d << (FRAC_PROB - FRAC_ACT)
    k = x // LN2_Q30
    r = x - k * LN2_Q30
    p = EXP_COEF[EXP_DEGREE]
    for n in range(EXP_DEGREE - 1, -1, -1):
        p = EXP_COEF[n] + rs_int(p * r, 30)
    return 0 if -k >= 40 else rs_int(p, -k)


EXP_T1 = [exp_poly_int(-(i << 16)) for i in range(32)]
EXP_T2 = [exp_poly_int(-(i << 8)) for i in range(256)]
EXP_T3 = [exp_poly_int(-i) for i in range(256)]
_EXP_TABLES = {}


def _exp_tables(device):
    key = str(device)
    t = _EXP_TABLES.get(key)
    if t is None:
        t = _EXP_TABLES[key] = tuple(torch.tensor(x, dtype=torch.int64, device=device) for x in (EXP_T1, EXP_T2, EXP_T3))
    return t


def exp_q(d: torch.Tensor) -> torch.Tensor:
    """e^(d/2^16) at Q30 for d <= 0: RS(RS(T1[a]*T2[b], 30)*T3[c], 30)."""
    t1, t2, t3 = _exp_tables(d.device)
    u = -d
    a = (u >> 16).clamp(max=31)
    return rs(rs(t1[a] * t2[(u >> 8) & 255], 30) * t3[u & 255], 30)


def ln_q(z: torch.Tensor) -> torch.Tensor:
    """ln(z / 2^30) at Q30 for 2^30 <= z < 2^62."""
    n = bitlen(z)
    mu = rs_t(z, n - 31)
    s = DIV((mu - ONE30) << 30, mu + ONE30)
    s2 = rs(s * s, 30)
    p = torch.full_like(z, LN_COEF[LN_TERMS - 1])
    for i in range(LN_TERMS - 2, -1, -1):
        p = LN_COEF[i] + rs(p * s2, 30)
    return rs(s * p, 29) + (n - 31) * LN2_Q30


def pow_q30(b: int, t: int) -> int:
    r = ONE30
    while t > 0:
        if t & 1:
            r = rs_int(r * b, 30)
        b = rs_int(b * b, 30)
        t >>= 1
    return r


def schedule(step, lr, min_lr, warmup, decay, wd, beta1, beta2):
    """The step scalars [delta, a, k2, lr_t] (see Go's Schedule)."""
    t = step + 1
    if warmup > 0 and t <= warmup:
        lr_t = div_int(lr * t, warmup)
    elif decay > 0 and t >= decay:
        lr_t = min_lr
    elif decay > 0:
        lr_t = min_lr + div_int((lr - min_lr) * (decay - t), decay - warmup)
    else:
        lr_t = lr
    delta = (lr_t * wd + (1 << 39)) >> 40
    bc1 = ONE30 - pow_q30(beta1, t)
    a = div_int(lr_t << 40, bc1)
    bc2 = ONE30 - pow_q30(beta2, t)
    k2 = div_int(1 << 54, isqrt_int(bc2 << 30))
    return [delta, a, k2, lr_t]
