#!/usr/bin/env python3
"""The exact transformer workload in PyTorch: the trainer-contract entry point
and a command line to run steps and print roots.

  train.py                 trainer contract: reads DEPIN_* (see
                           provider/trainer/CONTRACT.md) and DEPIN_EXACT_CONFIG
  train.py steps ...       run N steps from a seed or a state, print roots
  train.py graph ...       print the operator graph as JSON
  train.py oproots ...     run one step, print every operator's output root
  train.py arith           evaluate the arithmetic primitives on JSON vectors
                           from stdin (used by the Go tests)
  train.py diloco-pg ...   a worker's pseudo-gradient of a round (pkg/diloco)
  train.py diloco-aggregate ...
                           the next global state from a round's pseudo-gradients

Run `train.py steps --help` for the options. The device is CUDA when
CUDA_VISIBLE_DEVICES names GPUs (and torch sees them), else CPU.
"""
import argparse
import json
import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import torch  # noqa: E402

from depin_exact import runtime  # noqa: E402
from depin_exact.config import Config  # noqa: E402


def main(argv):
    if argv and argv[0] == "arith":
        return runtime.arith_vectors(sys.stdin, sys.stdout)
    if argv and argv[0].startswith("diloco-"):
        return diloco_main(argv[0], argv[1:])
    if not argv or argv[0] not in ("steps", "graph", "oproots"):
        return runtime.contract_main(argv)
    cmd, rest = argv[0], argv[1:]
    ap = argparse.ArgumentParser(prog=f"train.py {cmd}")
    ap.add_argument("--config", required=True, help="config JSON text or @FILE")
    if cmd != "graph":
        ap.add_argument("--seed", default="", help="job seed, hex (initial weights and data order)")
        ap.add_argument("--data", help="training stream: a file, or a directory (its files concatenated by name)")
        ap.add_argument("--from-state", help="start from this state file instead of Init(seed)")
        ap.add_argument("--init-weights", help="start from these float weights (safetensors) instead of Init(seed)")
        ap.add_argument("--steps", type=int, default=1)
        ap.add_argument("--save", help="write the final state here")
        ap.add_argument("--threads", type=int, default=0, help="torch intra-op threads (0: torch's default)")
        ap.add_argument("--nproc", type=int, default=1, help="data-parallel processes (gloo on CPU, NCCL on GPU)")
        ap.add_argument("--device", default="auto", help="auto, cpu or cuda")
    a = ap.parse_args(rest)
    cfgtext = open(a.config[1:]).read() if a.config.startswith("@") else a.config
    cfg = Config.from_json(cfgtext)
    if cmd == "graph":
        from depin_exact.graph import train_graph
        print(train_graph(cfg).to_json())
        return 0
    if a.threads:
        torch.set_num_threads(a.threads)
    return runtime.cli_run(cmd, cfg, a)


def diloco_main(cmd, rest):
    """Training-together rounds (docs/training-together.md): files in, files
    out, the root printed as hex."""
    from depin_exact import diloco
    from depin_exact.state import decode
    ap = argparse.ArgumentParser(prog=f"train.py {cmd}")
    ap.add_argument("--global", dest="glob", required=True, help="the round's global state file")
    ap.add_argument("--out", required=True, help="where to write the result")
    if cmd == "diloco-pg":
        ap.add_argument("--local", required=True, help="the worker's state at the end of the round")
        ap.add_argument("--worker", type=int, required=True)
        ap.add_argument("--error", help="the worker's error buffer (int32 section; top_k > 0; default zeros)")
        ap.add_argument("--error-out", help="write the new error buffer here (top_k > 0)")
    elif cmd == "diloco-aggregate":
        ap.add_argument("pseudo_gradients", nargs="+", help="dense or compressed files, ascending worker order")
    else:
        raise SystemExit(f"unknown command {cmd}")
    a = ap.parse_args(rest)
    glob = open(a.glob, "rb").read()
    if cmd == "diloco-aggregate":
        out = diloco.aggregate(glob, [open(p, "rb").read() for p in a.pseudo_gradients])
        root = diloco.root_of_bytes(out)
    else:
        err = None
        if a.error:
            err = diloco.read_section(open(a.error, "rb").read(), diloco.Layout(diloco.Header.decode(glob).hyper.config()).elems())
        out, root, new_err = diloco.pseudo_gradient(glob, decode(open(a.local, "rb").read()), a.worker, err)
        if a.error_out and new_err is not None:
            with open(a.error_out, "wb") as f:
                f.write(diloco.section_bytes(new_err))
    with open(a.out, "wb") as f:
        f.write(out)
    print(root.hex())
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
