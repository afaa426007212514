#!/usr/bin/env python3
"""Checks the exact workload's PyTorch path on a GPU against Go's roots and
measures its speed against float32 and bf16 PyTorch.

  go run ./tools/exactroots -out roots.json          (where Go is)
  python3 gpu_check.py --expected roots.json         (on the GPU machine)
  python3 gpu_check.py --expected roots.json --device cpu --speed small

For every case of the expected file it trains the same steps with the
PyTorch path on the device (and, with two or more GPUs, data-parallel over
two with NCCL) and compares every state root and loss; then, per model
size, it times a training step of the exact path, of float32 PyTorch and of
bf16-autocast PyTorch (same architecture, same batch, AdamW) and prints the
ratios. Exit status 1 if any root differs. Designed to finish in under
five minutes on one H200.
"""
import argparse
import base64
import json
import os
import statistics
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import torch  # noqa: E402

from depin_exact import executor, runtime  # noqa: E402
from depin_exact.config import Config, params  # noqa: E402
from depin_exact.data import step_batch  # noqa: E402
from depin_exact.state import init_state  # noqa: E402

SPEED_SIZES = {
    "small": [{"model": {"layers": 1, "d_model": 32, "heads": 2, "d_ff": 64, "context": 16, "vocab": 256},
               "train": {"batch": 4, "lr": 1e-3}}],
    "full": [
        {"model": {"layers": 2, "d_model": 128, "heads": 4, "d_ff": 512, "context": 64, "vocab": 256},
         "train": {"batch": 16, "lr": 1e-3}},
        {"model": {"layers": 4, "d_model": 256, "heads": 4, "d_ff": 1024, "context": 128, "vocab": 256},
         "train": {"batch": 16, "lr": 1e-3}},
        {"model": {"layers": 12, "d_model": 768, "heads": 12, "d_ff": 3072, "context": 256, "vocab": 256},
         "train": {"batch": 32, "lr": 1e-3}},
    ],
}


def sync(device):
    if device.startswith("cuda"):
        torch.cuda.synchronize()


def check_case(case, device, nproc):
    cfg = Config.from_dict(case["config"])
    seed = bytes.fromhex(case["seed"])
    stream = base64.b64decode(case["stream_b64"])
    st = init_state(cfg, seed)
    want = case["roots"]
    got_roots = [st.root().hex()]
    t0 = time.perf_counter()
    res = runtime.run_parallel(nproc, device, runtime._steps, cfg, st.encode(), seed, stream, len(want) - 1, None)
    secs = time.perf_counter() - t0
    got_roots += [l["root"] for l in res["lines"]]
    losses = [l["loss"] for l in res["lines"]]
    ok = got_roots == want and losses == case["losses"]
    first_bad = next((i for i, (a, b) in enumerate(zip(got_roots, want)) if a != b), None)
    return {"case": case["name"], "processes": nproc, "steps": len(want) - 1, "match": ok,
            "first_differing_h": first_bad, "seconds": round(secs, 3), "go_seconds": case.get("go_seconds")}


def time_steps(fn, device, n):
    ts = []
    for i in range(n + 2):  # two warm-up steps
        sync(device)
        t0 = time.perf_counter()
        fn(i)
        sync(device)
        if i >= 2:
            ts.append(time.perf_counter() - t0)
    return statistics.median(ts)


def speed(cfgd, device, n):
    from bench import float_model_from, float_optimizer, lr_at
    cfg = Config.from_dict(cfgd)
    seed = b"gpu check speed"
    stream = bytes(range(256)) * 4096
    st0 = init_state(cfg, seed)
    state = {"s": st0.to(device)}
    batches = [step_batch(cfg, seed, i, stream) for i in range(n + 2)]

    def exact_step(i):
        state["s"] = executor.step(state["s"], batches[i], device=device)
    t_exact = time_steps(exact_step, device, n)
    out = {"config": cfgd, "tokens_per_step": cfg.tokens_per_step,
           "params": sum(p.rows * p.cols for p in params(cfg)), "exact_step_s": t_exact}
    del state["s"]
    for name, dtype in (("float32", None), ("bf16", torch.bfloat16)):
        m = float_model_from(st0).to(device)
        opt = float_optimizer(m, cfg)
        wins = [torch.tensor([list(w) for w in b], dtype=torch.int64, device=device) for b in batches]
        devtype = "cuda" if device.startswith("cuda") else "cpu"

        def fstep(i, m=m, opt=opt, wins=wins, dtype=dtype, devtype=devtype):
            for g in opt.param_groups:
                g["lr"] = lr_at(cfg, i + 1)
            opt.zero_grad(set_to_none=True)
            if dtype is None:
                loss = m.loss(wins[i])
            else:
                with torch.autocast(device_type=devtype, dtype=dtype):
                    loss = m.loss(wins[i])
            loss.backward()
            opt.step()
        out[f"{name}_step_s"] = time_steps(fstep, device, n)
        del m, opt
    out["exact_over_float32"] = t_exact / out["float32_step_s"]
    out["exact_over_bf16"] = t_exact / out["bf16_step_s"]
    for k in ("exact", "float32", "bf16"):
        out[f"{k}_tokens_per_s"] = cfg.tokens_per_step / out[f"{k}_step_s"]
    return out


def main(argv):
    ap = argparse.ArgumentParser()
    ap.add_argument("--expected", required=True, help="JSON from go run ./tools/exactroots")
    ap.add_argument("--device", default="cuda", choices=["cuda", "cpu"])
    ap.add_argument("--speed", default="full", choices=["full", "small", "none"])
    ap.add_argument("--speed-steps", type=int, default=5)
    ap.add_argument("--threads", type=int, default=0)
    a = ap.parse_args(argv)
    if a.threads:
        torch.set_num_threads(a.threads)
    t_start = time.perf_counter()
    if a.device == "cuda":
        if not torch.cuda.is_available():
            print(json.dumps({"error": "CUDA not available; run with --device cpu"}))
            return 2
        runtime.setup_cuda()
        os.environ.setdefault("CUBLAS_WORKSPACE_CONFIG", ":4096:8")
    env = {"torch": torch.__version__, "device": a.device,
           "gpu": torch.cuda.get_device_name(0) if a.device == "cuda" else None,
           "gpus": torch.cuda.device_count() if a.device == "cuda" else 0,
           "cuda": torch.version.cuda, "threads": torch.get_num_threads()}
    if a.device == "cpu":
        from bench import blas_name
        env["blas"] = blas_name()
    print(json.dumps({"environment": env}), flush=True)
    with open(a.expected) as f:
        expected = json.load(f)
    ok = True
    for case in expected["cases"]:
        r = check_case(case, a.device, 1)
        ok &= r["match"]
        print(json.dumps(r), flush=True)
        if a.device == "cuda" and torch.cuda.device_count() >= 2 and case["config"]["train"].get("micro_batch", 0) \
                and case["config"]["train"]["batch"] > case["config"]["train"]["micro_batch"]:
            r = check_case(case, a.device, 2)
            ok &= r["match"]
            print(json.dumps(r), flush=True)
    if a.speed != "none":
        for cfgd in SPEED_SIZES[a.speed]:
            print(json.dumps({"speed": speed(cfgd, a.device, a.speed_steps)}), flush=True)
            if a.device == "cuda":
                torch.cuda.empty_cache()
    print(json.dumps({"roots_match": ok, "seconds": round(time.perf_counter() - t_start, 1)}), flush=True)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
