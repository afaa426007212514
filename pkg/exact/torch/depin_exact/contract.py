"""The trainer contract (provider/trainer/CONTRACT.md) for the exact
workload: DEPIN_* environment in, checkpoints, trace and metrics out.

The sidecar sets DEPIN_EXACT_CONFIG for the exact workload (job kinds
reference and transformer), whose h_i is the state's Merkle root. Run as the
image of a `kind: container` job (scripts/torch-image.sh), the trainer gets
no DEPIN_EXACT_CONFIG: the job's command passes the configuration instead
(--config JSON or @FILE), and h_i is then the SHA-256 of the encoded state,
as the contract asks of container workloads. The state file, and so the
checkpoint's state_root, is the same either way."""
import argparse
import hashlib
import json
import os
import signal
import sys
import time

import torch

from . import diloco, executor
from .config import Config
from .data import read_stream_dir, step_batch
from .runtime import pick_device, run_parallel
from .state import decode, init_state

_stop = {"flag": False}


def _on_term(signum, frame):
    _stop["flag"] = True


def fsync_write(path, data: bytes):
    with open(path, "wb") as f:
        f.write(data)
        f.flush()
        os.fsync(f.fileno())


def env(name, required=True):
    v = os.environ.get(name)
    if v is None and required:
        raise SystemExit(f"{name} is not set (see provider/trainer/CONTRACT.md)")
    return v or ""


def state_hash(st, mode):
    """(h, root) of a CPU state: h is what the trace records (its Merkle root,
    or with mode "sha256" the SHA-256 of its encoding), root its Merkle root."""
    if mode == "root":
        root = st.root()
        return root, root
    from .merkle import root_of_bytes
    enc = st.encode()
    return hashlib.sha256(enc).digest(), root_of_bytes(enc)


def _train(device, dist, cfg, start_bytes, seed, stream, total, interval, out_dir, hash_mode="root"):
    rank = 0 if dist is None else dist[0]
    signal.signal(signal.SIGTERM, _on_term)  # spawned ranks stop between steps too
    st = decode(start_bytes).to(device)
    trace = [state_hash(st.to("cpu"), hash_mode)[0]]
    nxt = min(st.step + interval, total)
    metrics = open(os.path.join(out_dir, "metrics.jsonl"), "a") if rank == 0 else None
    while st.step < total:
        stop = torch.tensor([1 if _stop["flag"] else 0], dtype=torch.int64, device=device)
        if dist is not None:
            dist[2](stop)  # every rank stops at the same step
        if int(stop.item()):
            if metrics:
                metrics.close()
            return {"stopped": st.step}
        t0 = time.time()
        st = executor.step(st, step_batch(cfg, seed, st.step, stream), device=device, dist=dist)
        if rank != 0:
            continue
        cpu = st.to("cpu")
        h, root = state_hash(cpu, hash_mode)
        trace.append(h)
        metrics.write(json.dumps({"step": st.step, "loss": st.loss / float(1 << 30), "loss_q30": st.loss,
                                  "root": root.hex(), "seconds": round(time.time() - t0, 4)}) + "\n")
        if st.step == nxt:
            metrics.flush()
            os.fsync(metrics.fileno())
            d = os.path.join(out_dir, "checkpoints", f"step-{st.step}")
            os.makedirs(d, exist_ok=True)
            fsync_write(os.path.join(d, "state"), cpu.encode())
            fsync_write(os.path.join(d, "trace.txt"), "".join(h.hex() + "\n" for h in trace).encode())
            fsync_write(os.path.join(d, "COMPLETE"), b"")
            trace = [h]
            nxt = min(st.step + interval, total)
    if metrics:
        metrics.close()
    return {"stopped": None}


def parse_args(argv):
    ap = argparse.ArgumentParser(
        prog="train.py",
        description="The trainer contract (provider/trainer/CONTRACT.md): DEPIN_* in, checkpoints out.")
    ap.add_argument("--config", default="",
                    help="the exact configuration as JSON text or @FILE, for runs where DEPIN_EXACT_CONFIG is empty "
                         "(container jobs); when both are set they must agree")
    ap.add_argument("--threads", type=int, default=0,
                    help="torch intra-op threads (torch.set_num_threads; 0: torch's default). The result is "
                         "bit-identical for any value")
    ap.add_argument("--state-hash", choices=("auto", "root", "sha256"), default="auto",
                    help="what the trace's h_i is: the state's Merkle root (the exact workload) or the SHA-256 of "
                         "the state file (container workloads). auto: root when DEPIN_EXACT_CONFIG is set, "
                         "else sha256")
    return ap.parse_args(argv)


def _read_config(text):
    return open(text[1:]).read() if text.startswith("@") else text


def run_contract(argv):
    args = parse_args(argv)
    if args.threads:
        torch.set_num_threads(args.threads)
    signal.signal(signal.SIGTERM, _on_term)
    out_dir = env("DEPIN_OUTPUT_DIR")
    resume = env("DEPIN_RESUME_FROM")
    data_dir = env("DEPIN_DATA_DIR")
    start, total = int(env("DEPIN_START_STEP")), int(env("DEPIN_TOTAL_STEPS"))
    interval = int(env("DEPIN_CHECKPOINT_INTERVAL"))
    seed = bytes.fromhex(env("DEPIN_JOB_SEED"))
    env_config = env("DEPIN_EXACT_CONFIG", required=False)
    if not env_config and not args.config:
        raise SystemExit("no configuration: DEPIN_EXACT_CONFIG is empty and no --config was given "
                         "(a container job passes it in its command: --config '{\"model\": ..., \"train\": ...}')")
    cfg = Config.from_json(_read_config(env_config or args.config))
    if env_config and args.config and Config.from_json(_read_config(args.config)).hyper() != cfg.hyper():
        raise SystemExit("--config differs from DEPIN_EXACT_CONFIG")
    hash_mode = args.state_hash
    if hash_mode == "auto":
        hash_mode = "root" if env_config else "sha256"
    stream = read_stream_dir(data_dir)
    rnd = round_env()
    if rnd is not None:
        if not env_config:
            raise SystemExit("a round run (DEPIN_ROUND set) trains the exact transformer: DEPIN_EXACT_CONFIG must be set")
        st, stream = round_start(cfg, rnd, start, total, interval, resume, stream)
    elif resume:
        with open(os.path.join(resume, "state"), "rb") as f:
            st = decode(f.read())
        if st.step != start or st.config.hyper() != cfg.hyper():
            raise SystemExit(f"resume state is at step {st.step} of another config or step (want {start})")
    elif start != 0:
        raise SystemExit("DEPIN_START_STEP > 0 needs DEPIN_RESUME_FROM")
    elif os.environ.get("DEPIN_INIT_WEIGHTS"):
        from .safetensors_io import import_weights
        st = import_weights(cfg, os.environ["DEPIN_INIT_WEIGHTS"])
    else:
        st = init_state(cfg, seed)
    device = pick_device("auto")
    nproc = int(os.environ.get("DEPIN_TORCH_PROCS", "0") or 0)
    if nproc <= 0:
        nproc = torch.cuda.device_count() if device == "cuda" else 1
    os.makedirs(os.path.join(out_dir, "checkpoints"), exist_ok=True)
    res = run_parallel(nproc, device, _train, cfg, st.encode(), seed, stream, total, interval, out_dir, hash_mode)
    if res["stopped"] is not None:
        print(f"stopped by SIGTERM after step {res['stopped']}", file=sys.stderr)
        return 143
    fsync_write(os.path.join(out_dir, "DONE"), b"")
    return 0


ROUND_VARS = ("DEPIN_WORKER_INDEX", "DEPIN_WORLD_SIZE", "DEPIN_ROUND", "DEPIN_GLOBAL_STATE", "DEPIN_SYNC")


def round_env():
    """A training-together round run's variables as (worker, workers, round,
    global state path, sync tuple), or None when all are empty or unset (any
    other run)."""
    vals = [os.environ.get(k, "") for k in ROUND_VARS]
    if not any(vals):
        return None
    if not all(vals):
        raise SystemExit("a round run needs every one of " + ", ".join(ROUND_VARS))
    try:
        worker, workers, rnd = (int(v, 10) for v in vals[:3])
        sync = tuple(int(f, 10) for f in vals[4].split(","))
    except ValueError:
        raise SystemExit(f"round variables must be decimal integers, DEPIN_SYNC every,outer_lr_q30,outer_momentum_q30,top_k: "
                         f"got {vals}")
    if len(sync) != 4:
        raise SystemExit(f"DEPIN_SYNC must be every,outer_lr_q30,outer_momentum_q30,top_k, got {vals[4]!r}")
    if not 0 <= worker < workers <= diloco.MAX_WORKERS:
        raise SystemExit(f"DEPIN_WORKER_INDEX ({worker}) must be below DEPIN_WORLD_SIZE ({workers}), "
                         f"which is in [1, {diloco.MAX_WORKERS}]")
    if not os.path.isabs(vals[3]):
        raise SystemExit(f"DEPIN_GLOBAL_STATE must be an absolute path, got {vals[3]!r}")
    return worker, workers, rnd, vals[3], sync


def round_start(cfg, rnd, start, total, interval, resume, stream):
    """A round run's start state and data (the contract's "Round runs"):
    WorkerStart of DEPIN_GLOBAL_STATE with the Adam moments of the carry in
    DEPIN_RESUME_FROM (empty for a joiner), and the stream as it is: the
    sidecar put the worker's data of the round (its assigned shards) in
    DEPIN_DATA_DIR."""
    worker, _, r, path, sync = rnd
    every = sync[0]
    if every < 1 or start != r * every or total != (r + 1) * every:
        raise SystemExit(f"round {r} of every {every} trains steps {r * every} to {(r + 1) * every}, "
                         f"not DEPIN_START_STEP {start} to DEPIN_TOTAL_STEPS {total}")
    if interval != every:
        raise SystemExit(f"DEPIN_CHECKPOINT_INTERVAL must be the round's {every} steps, got {interval}")
    if os.environ.get("DEPIN_INIT_WEIGHTS"):
        raise SystemExit("a round run starts from DEPIN_GLOBAL_STATE, not DEPIN_INIT_WEIGHTS")
    with open(path, "rb") as f:
        glob = f.read()
    try:
        h = diloco.Header.decode(glob)
        diloco.decode_global(glob)
    except ValueError as e:
        raise SystemExit(f"DEPIN_GLOBAL_STATE {path}: {e}")
    if h.round != r:
        raise SystemExit(f"DEPIN_GLOBAL_STATE is the global state of round {h.round}, the run is round {r}")
    if h.sync != sync:
        raise SystemExit("DEPIN_GLOBAL_STATE was made under another sync spec than DEPIN_SYNC")
    if h.hyper != cfg.hyper():
        raise SystemExit("DEPIN_GLOBAL_STATE is not of this job's model configuration")
    carry = None
    if resume:
        with open(os.path.join(resume, "state"), "rb") as f:
            carry = decode(f.read())
        if carry.config.hyper() != cfg.hyper() or carry.step > start or carry.step % every != 0:
            raise SystemExit(f"{resume}: a carry must be a round-end state of this job before step {start}, "
                             f"got step {carry.step}")
    if not stream:
        raise SystemExit(f"DEPIN_DATA_DIR holds no data for worker {worker} in round {r}")
    return diloco.worker_start(glob, carry), stream
