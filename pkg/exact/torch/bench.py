#!/usr/bin/env python3
"""Benchmarks of the exact workload against plain float32 PyTorch of the
same architecture (float_model.py), measured in the same run.

  bench.py quality [--steps N] [--threads T] [--config JSON]
      trains the exact model (PyTorch path) and the float32 model from the
      same initial weights on the same batches of the fortunes corpus and
      prints held-out bits per byte of both and their ratio.
  bench.py speed --config JSON [--steps N] [--threads T]
      step time of the exact PyTorch path and of float32 PyTorch (forward,
      backward and AdamW) on the same batches, and tokens per second.

Every result is one JSON object on stdout. The BLAS torch uses is named in
it (Debian's torch links the system libblas: OpenBLAS when
libopenblas0-pthread is installed, else the ~37x slower reference BLAS).
"""
import argparse
import json
import math
import os
import statistics
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import torch  # noqa: E402

from depin_exact import executor  # noqa: E402
from depin_exact.config import Config  # noqa: E402
from depin_exact.data import step_batch  # noqa: E402
from depin_exact.safetensors_io import export_float  # noqa: E402
from depin_exact.state import init_state  # noqa: E402
from float_model import FloatGPT  # noqa: E402

FORTUNES = "/usr/share/games/fortunes"
QUALITY_CONFIG = {"model": {"layers": 2, "d_model": 128, "heads": 4, "d_ff": 512, "context": 64, "vocab": 256},
                  "train": {"batch": 16, "lr": 3e-3, "warmup_steps": 30, "decay_steps": 400, "min_lr": 3e-4,
                            "weight_decay": 0.1}}


def blas_threads():
    import ctypes
    for lib in ("libopenblas.so.0", "libblas.so.3"):
        try:
            return ctypes.CDLL(lib).openblas_get_num_threads()
        except (OSError, AttributeError):
            continue
    return None


def blas_name():
    n = blas_threads()
    return _blas_name() + (f", {n} BLAS threads" if n else "")


def _blas_name():
    for p in ("/usr/lib/x86_64-linux-gnu/libblas.so.3", "/usr/lib/aarch64-linux-gnu/libblas.so.3"):
        if os.path.exists(p):
            real = os.path.realpath(p)
            if "openblas" in real:
                return "OpenBLAS (%s)" % real
            if "blis" in real:
                return "BLIS (%s)" % real
            if "mkl" in real:
                return "MKL (%s)" % real
            return "reference BLAS (%s)" % real
    return "torch built-in (%s)" % torch.__config__.show().split("BLAS_INFO=")[-1].split(",")[0]


def fortunes_stream():
    """The fortunes corpus: the text files (not .dat/.u8) in name order."""
    names = sorted(n for n in os.listdir(FORTUNES)
                   if os.path.isfile(os.path.join(FORTUNES, n)) and not n.endswith((".dat", ".u8")))
    if not names:
        raise SystemExit(f"no fortunes in {FORTUNES}: apt-get install fortunes")
    return b"".join(open(os.path.join(FORTUNES, n), "rb").read() for n in names)


def lr_at(cfg, t):
    """The float value of the exact schedule's lr_t for update t (1-based)."""
    h = cfg.hyper()
    from depin_exact.arith import schedule
    return schedule(t - 1, h.lr, h.min_lr, h.warmup_steps, h.decay_steps, h.weight_decay, h.beta1, h.beta2)[3] / 2.0 ** 40


def float_model_from(state, dtype=torch.float32):
    c = state.config
    m = FloatGPT(c.layers, c.d_model, c.heads, c.d_ff, c.context, c.vocab, c.norm_eps, dtype)
    m.load_weights(export_float(state))
    return m


def float_optimizer(m, cfg):
    # The exact run's hyperparameters, as the reals its fixed-point values are.
    h = cfg.hyper()
    opt = torch.optim.AdamW(m.parameters(), lr=lr_at(cfg, 1), betas=(h.beta1 / 2 ** 30, h.beta2 / 2 ** 30),
                            eps=h.eps / 2 ** 28, weight_decay=h.weight_decay / 2 ** 30)
    return opt


def float_step(m, opt, cfg, t, batch):
    for g in opt.param_groups:
        g["lr"] = lr_at(cfg, t)
    win = torch.tensor([list(w) for w in batch], dtype=torch.int64)
    opt.zero_grad(set_to_none=True)
    loss = m.loss(win)
    loss.backward()
    opt.step()
    return loss.item()


def eval_windows(heldout, context, n):
    span = len(heldout) - context - 1
    return [heldout[i * span // n:i * span // n + context + 1] for i in range(n)]


def bpb_exact(state, windows, bs=32):
    tot, cnt = 0, 0
    for i in range(0, len(windows), bs):
        _, lt = executor.forward(state.tensors, state.config, windows[i:i + bs])
        tot += int(lt.sum().item())
        cnt += lt.numel()
    return tot / cnt / 2 ** 30 / math.log(2)


def bpb_float(m, windows, bs=32):
    tot, cnt = 0.0, 0
    with torch.no_grad():
        for i in range(0, len(windows), bs):
            win = torch.tensor([list(w) for w in windows[i:i + bs]], dtype=torch.int64)
            logits = m(win[:, :-1]).double()
            tot += torch.nn.functional.cross_entropy(logits.reshape(-1, m.vocab), win[:, 1:].reshape(-1), reduction="sum").item()
            cnt += win[:, 1:].numel()
    return tot / cnt / math.log(2)


def quality(a):
    steps = a.steps
    d = json.loads(a.config) if a.config else json.loads(json.dumps(QUALITY_CONFIG))
    if not a.config:
        d["train"]["decay_steps"] = steps  # warm up, then decay linearly to min_lr at the last step
    cfg = Config.from_dict(d)
    stream = fortunes_stream()
    cut = len(stream) * 9 // 10
    train, heldout = stream[:cut], stream[cut:]
    seed = b"depinchain exact quality benchmark"
    st = init_state(cfg, seed)
    fm = float_model_from(st)
    opt = float_optimizer(fm, cfg)
    windows = eval_windows(heldout, cfg.context, a.eval_windows)
    t_exact = t_float = 0.0
    curve = []
    for i in range(steps):
        batch = step_batch(cfg, seed, st.step, train)
        t0 = time.perf_counter()
        st = executor.step(st, batch)
        t1 = time.perf_counter()
        fl = float_step(fm, opt, cfg, i + 1, batch)
        t2 = time.perf_counter()
        t_exact += t1 - t0
        t_float += t2 - t1
        if (i + 1) % max(1, steps // 10) == 0:
            curve.append({"step": i + 1, "exact_loss": st.loss / 2 ** 30, "float32_loss": fl})
            print(json.dumps(curve[-1] | {"exact_s": round(t_exact, 1), "float32_s": round(t_float, 1)}), file=sys.stderr, flush=True)
    be, bf = bpb_exact(st, windows), bpb_float(fm, windows)
    print(json.dumps({"bench": "quality", "config": cfg.to_dict(), "steps": steps, "train_bytes": len(train),
                      "heldout_bytes": len(heldout), "eval_tokens": len(windows) * cfg.context,
                      "exact_bpb": be, "float32_bpb": bf, "ratio": be / bf, "train_curve": curve,
                      "exact_seconds": t_exact, "float32_seconds": t_float, "threads": torch.get_num_threads(),
                      "blas": blas_name(), "torch": torch.__version__, "state_root": st.root().hex()}))


def speed(a):
    cfg = Config.from_dict(json.loads(a.config))
    device = a.device
    stream = fortunes_stream()
    seed = b"depinchain exact speed benchmark"
    st = init_state(cfg, seed).to(device)
    fm = float_model_from(st.to("cpu")).to(device)
    opt = float_optimizer(fm, cfg)
    te, tf = [], []
    for i in range(a.steps + 1):  # the first step of each warms up
        batch = step_batch(cfg, seed, st.step, stream)
        t0 = time.perf_counter()
        st = executor.step(st, batch, device=device)
        t1 = time.perf_counter()
        float_step(fm, opt, cfg, i + 1, batch)
        t2 = time.perf_counter()
        if i:
            te.append(t1 - t0)
            tf.append(t2 - t1)
    e, f = statistics.median(te), statistics.median(tf)
    tok = cfg.tokens_per_step
    print(json.dumps({"bench": "speed", "config": cfg.to_dict(), "steps": a.steps, "threads": torch.get_num_threads(),
                      "exact_step_s": e, "float32_step_s": f, "ratio": e / f, "exact_tokens_per_s": tok / e,
                      "float32_tokens_per_s": tok / f, "blas": blas_name(), "torch": torch.__version__}))


def main(argv):
    ap = argparse.ArgumentParser()
    ap.add_argument("what", choices=["quality", "speed"])
    ap.add_argument("--config", default="")
    ap.add_argument("--steps", type=int, default=400)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--eval-windows", type=int, default=512)
    ap.add_argument("--device", default="cpu")
    a = ap.parse_args(argv)
    torch.set_num_threads(a.threads)
    torch.manual_seed(0)
    (quality if a.what == "quality" else speed)(a)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
