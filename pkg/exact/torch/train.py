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


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
