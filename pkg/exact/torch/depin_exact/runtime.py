"""Running steps: devices, data-parallel processes, checkpoints."""
import json
import os
import pickle
import socket
import sys
import time

import torch

from . import executor
from .config import Config
from .data import read_stream_dir, step_batch
from .state import State, decode, init_state


def pick_device(name="auto"):
    if name == "cpu":
        return "cpu"
    if name == "cuda" or (name == "auto" and os.environ.get("CUDA_VISIBLE_DEVICES", "") != "" and torch.cuda.is_available()):
        setup_cuda()
        return "cuda"
    return "cpu"


def setup_cuda():
    # Exactness does not depend on these (every contraction is a float64
    # GEMM on integers and everything else is integer), but no reduced
    # precision or nondeterministic kernel is ever wanted here.
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    torch.backends.cudnn.deterministic = True
    torch.backends.cudnn.benchmark = False
    if hasattr(torch.backends.cuda.matmul, "allow_fp16_reduced_precision_reduction"):
        torch.backends.cuda.matmul.allow_fp16_reduced_precision_reduction = False


def read_stream(path):
    if os.path.isdir(path):
        return read_stream_dir(path)
    with open(path, "rb") as f:
        return f.read()


def load_start(cfg, a):
    seed = bytes.fromhex(a.seed)
    if a.from_state:
        with open(a.from_state, "rb") as f:
            st = decode(f.read())
        if st.config.hyper() != cfg.hyper():
            raise SystemExit("the state's config differs from --config")
        return st, seed
    if getattr(a, "init_weights", None):
        from .safetensors_io import import_weights
        return import_weights(cfg, a.init_weights), seed
    return init_state(cfg, seed), seed


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _worker(rank, world, port, device, fn, args, result_path):
    import torch.distributed as dist
    os.environ["MASTER_ADDR"], os.environ["MASTER_PORT"] = "127.0.0.1", str(port)
    backend = "nccl" if device == "cuda" else "gloo"
    dev = device
    if device == "cuda":
        torch.cuda.set_device(rank)
        dev = f"cuda:{rank}"
    dist.init_process_group(backend, rank=rank, world_size=world)
    try:
        def all_reduce(t):
            dist.all_reduce(t, op=dist.ReduceOp.SUM)
        res = fn(dev, (rank, world, all_reduce), *args)
        if rank == 0:
            with open(result_path, "wb") as f:
                pickle.dump(res, f)
    finally:
        dist.destroy_process_group()


def run_parallel(nproc, device, fn, *args):
    """fn(device, dist, *args) in nproc processes; returns rank 0's result.
    With nproc == 1 it runs in this process without torch.distributed."""
    if nproc <= 1:
        return fn(device, None, *args)
    import tempfile
    import torch.multiprocessing as mp
    with tempfile.TemporaryDirectory() as d:
        path = os.path.join(d, "result")
        # A result too large for a pipe would deadlock a queue against
        # join, so rank 0 leaves it in a file.
        mp.start_processes(_worker, args=(nproc, free_port(), device, fn, args, path), nprocs=nproc, join=True,
                           start_method="spawn")
        with open(path, "rb") as f:
            return pickle.load(f)


def _steps(device, dist, cfg, state_bytes, seed, stream, steps, per_step_cb_path):
    st = decode(state_bytes)
    st = st.to(device)
    lines = []
    for _ in range(steps):
        batch = step_batch(cfg, seed, st.step, stream)
        st = executor.step(st, batch, device=device, dist=dist)
        lines.append({"step": st.step, "loss": st.loss, "root": st.to("cpu").root().hex()})
    return {"lines": lines, "state": st.to("cpu").encode()}


def cli_run(cmd, cfg, a):
    device = pick_device(a.device)
    start, seed = load_start(cfg, a)
    stream = read_stream(a.data) if a.data else b""
    if cmd == "steps":
        print(json.dumps({"step": start.step, "loss": start.loss, "root": start.root().hex()}), flush=True)
        t0 = time.time()
        res = run_parallel(a.nproc, device, _steps, cfg, start.encode(), seed, stream, a.steps, None)
        for line in res["lines"]:
            print(json.dumps(line), flush=True)
        print(json.dumps({"seconds": time.time() - t0, "device": device}), file=sys.stderr)
        if a.save:
            with open(a.save, "wb") as f:
                f.write(res["state"])
        return 0
    if cmd == "oproots":
        recs = []

        def obs(op, out):
            recs.append({"index": op.index, "kind": op.kind,
                         "root": executor.tensor_root(out, executor.cached_train_graph(cfg).tensors[op.output].dtype).hex()})
        st = start.to(device)
        executor.step(st, step_batch(cfg, seed, st.step, stream), device=device, observer=obs)
        for r in recs:
            print(json.dumps(r))
        return 0
    raise SystemExit(f"unknown command {cmd}")


def contract_main(argv):
    from .contract import run_contract
    return run_contract(argv)


def arith_vectors(inp, out):
    """Reads {"fn": [[args...], ...], ...} and writes {"fn": [results...]}:
    the primitives on int64 tensors, for comparison with Go's."""
    from . import arith as A
    req = json.load(inp)
    T = lambda xs: torch.tensor(xs, dtype=torch.int64)  # noqa: E731
    res = {}
    for fn, args in req.items():
        cols = list(zip(*args)) if args else []
        if fn == "rs":
            r = A.rs_t(T(cols[0]), T(cols[1]))
        elif fn == "div":
            r = A.DIV(T(cols[0]), T(cols[1]))
        elif fn == "mulshift":
            r = torch.cat([A.mulshift(T([a]), T([c]), n) for a, c, n in args]) if args else T([])
        elif fn == "isqrt":
            r = A.isqrt(T(cols[0]))
        elif fn == "bitlen":
            r = A.bitlen(T(cols[0]))
        elif fn == "exp":
            r = A.exp_q(T(cols[0]))
        elif fn == "ln":
            r = A.ln_q(T(cols[0]))
        elif fn == "qshift":  # qexp of a one-element row at frac 0 is qShift(|x|)
            from .kernels import k_qexp
            from .graph import Op, TensorSpec
            x = T(cols[0]).reshape(-1, 1)
            r = k_qexp(Op(0, "qexp", [0], 1, [("frac", 0)], "", -1), [x], [TensorSpec(0, "x", "i32", list(x.shape), 0)], None)
        elif fn == "schedule":
            r = T([A.schedule(*a) for a in args])
        else:
            raise SystemExit(f"unknown primitive {fn}")
        res[fn] = r.tolist()
    json.dump(res, out)
    return 0
