#!/usr/bin/env python3
"""Example depinchain trainer: a tiny character-level language model in
PyTorch that honours the trainer contract (provider/trainer/CONTRACT.md).

It reads its run from the DEPIN_* environment variables, trains on the text
in DEPIN_DATA_DIR, and writes checkpoints/step-<N>/{state,trace.txt,COMPLETE}
and metrics.jsonl into DEPIN_OUTPUT_DIR. The per-step hash h_i is the SHA-256
of the model's canonical serialisation (see serialize), and the state file of
a checkpoint is exactly those bytes, so h_end = SHA-256(state) as the
contract requires, and a run resumed from a checkpoint continues bit for bit.
"""

import hashlib
import json
import os
import signal
import struct
import sys

# cuBLAS is deterministic only with a fixed workspace, which must be chosen
# before CUDA initialises (torch.use_deterministic_algorithms refuses
# otherwise).
os.environ.setdefault("CUBLAS_WORKSPACE_CONFIG", ":4096:8")

import numpy as np
import torch
from torch import nn

VOCAB = 256  # bytes
CONTEXT = 8
EMBED = 16
HIDDEN = 64
BATCH = 16
LEARNING_RATE = 0.5
STATE_MAGIC = b"DPT1"  # format of the state file; bump on any layout change


class CharModel(nn.Module):
    """Embeds CONTEXT bytes and predicts the next one through one hidden layer."""

    def __init__(self):
        super().__init__()
        self.embed = nn.Embedding(VOCAB, EMBED)
        self.hidden = nn.Linear(CONTEXT * EMBED, HIDDEN)
        self.out = nn.Linear(HIDDEN, VOCAB)

    def forward(self, context):
        x = self.embed(context).flatten(1)
        return self.out(torch.tanh(self.hidden(x)))


def fail(message):
    print(f"train.py: {message}", file=sys.stderr)
    sys.exit(2)


def read_env():
    """The contract's environment, checked the way the sidecar builds it."""
    names = ["DEPIN_JOB_ID", "DEPIN_LEASE_ID", "DEPIN_OUTPUT_DIR", "DEPIN_RESUME_FROM", "DEPIN_DATA_DIR",
             "DEPIN_START_STEP", "DEPIN_TOTAL_STEPS", "DEPIN_CHECKPOINT_INTERVAL", "DEPIN_JOB_SEED"]
    missing = [n for n in names if n not in os.environ]
    if missing:
        fail("not set: " + ", ".join(missing))
    env = {n: os.environ[n] for n in names}
    try:
        for n in ["DEPIN_START_STEP", "DEPIN_TOTAL_STEPS", "DEPIN_CHECKPOINT_INTERVAL"]:
            env[n] = int(env[n])
        env["DEPIN_JOB_SEED"] = bytes.fromhex(env["DEPIN_JOB_SEED"])
    except ValueError as e:
        fail(f"malformed environment: {e}")
    if env["DEPIN_CHECKPOINT_INTERVAL"] <= 0 or env["DEPIN_START_STEP"] >= env["DEPIN_TOTAL_STEPS"]:
        fail("nothing to train: check DEPIN_START_STEP, DEPIN_TOTAL_STEPS and DEPIN_CHECKPOINT_INTERVAL")
    if (env["DEPIN_START_STEP"] > 0) != (env["DEPIN_RESUME_FROM"] != ""):
        fail("DEPIN_RESUME_FROM must name a checkpoint exactly when DEPIN_START_STEP is positive")
    return env


def read_data(data_dir):
    """The sidecar's corpus.txt if present, else every file of the data dir in name order."""
    corpus = os.path.join(data_dir, "corpus.txt")
    paths = [corpus] if os.path.exists(corpus) else sorted(
        os.path.join(data_dir, n) for n in os.listdir(data_dir) if os.path.isfile(os.path.join(data_dir, n)))
    data = b"".join(open(p, "rb").read() for p in paths)
    if len(data) <= CONTEXT:
        fail(f"{data_dir} holds {len(data)} bytes of data, need more than {CONTEXT}")
    return torch.tensor(list(data), dtype=torch.long)


def serialize(model):
    """Canonical bytes of the model: the tensors of its state_dict in name
    order, each as name, shape and little-endian float32 values, after a
    magic and the tensor count. Unlike torch.save's pickle, equal weights
    always give equal bytes, so their SHA-256 can be the step hash."""
    state = model.state_dict()
    parts = [STATE_MAGIC, struct.pack("<I", len(state))]
    for name in sorted(state):
        tensor = state[name].detach().to("cpu", torch.float32).contiguous()
        encoded = name.encode()
        parts.append(struct.pack("<I", len(encoded)) + encoded)
        parts.append(struct.pack("<I", tensor.dim()) + b"".join(struct.pack("<Q", d) for d in tensor.shape))
        parts.append(tensor.numpy().astype("<f4").tobytes())
    return b"".join(parts)


def deserialize(model, blob):
    """Loads bytes written by serialize into model, strictly."""
    if blob[:4] != STATE_MAGIC:
        raise ValueError("not a DPT1 state")
    offset = 4

    def take(n):
        nonlocal offset
        if offset + n > len(blob):
            raise ValueError("truncated state")
        chunk = blob[offset:offset + n]
        offset += n
        return chunk

    state = {}
    (count,) = struct.unpack("<I", take(4))
    for _ in range(count):
        (name_len,) = struct.unpack("<I", take(4))
        name = take(name_len).decode()
        (ndim,) = struct.unpack("<I", take(4))
        shape = struct.unpack(f"<{ndim}Q", take(8 * ndim))
        values = np.frombuffer(take(4 * int(np.prod(shape, dtype=np.int64))), dtype="<f4")
        state[name] = torch.from_numpy(values.astype(np.float32).reshape(shape))
    if offset != len(blob):
        raise ValueError("trailing bytes after the state")
    model.load_state_dict(state, strict=True)


def batch_starts(seed, step, limit):
    """Window starts of a step's batch, from SHA-256 of the seed, the step
    and the example index only: a resumed run picks the same data without
    any random-generator state in the checkpoint."""
    starts = []
    for k in range(BATCH):
        digest = hashlib.sha256(b"depinchain/example-pytorch/batch" + seed + struct.pack("<QI", step, k)).digest()
        starts.append(int.from_bytes(digest[:8], "little") % limit)
    return torch.tensor(starts, dtype=torch.long)


def write_synced(path, data):
    with open(path, "wb") as f:
        f.write(data)
        f.flush()
        os.fsync(f.fileno())


def sync_dir(path):
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def write_checkpoint(output_dir, step, state, trace):
    """checkpoints/step-<step>/: state and trace.txt, then COMPLETE, last."""
    folder = os.path.join(output_dir, "checkpoints", f"step-{step}")
    os.makedirs(folder, exist_ok=True)
    write_synced(os.path.join(folder, "state"), state)
    write_synced(os.path.join(folder, "trace.txt"), "".join(h.hex() + "\n" for h in trace).encode())
    sync_dir(folder)
    write_synced(os.path.join(folder, "COMPLETE"), b"")
    sync_dir(folder)


def main():
    env = read_env()
    output_dir = env["DEPIN_OUTPUT_DIR"]
    seed = env["DEPIN_JOB_SEED"]
    start, total, interval = env["DEPIN_START_STEP"], env["DEPIN_TOTAL_STEPS"], env["DEPIN_CHECKPOINT_INTERVAL"]

    # Bit-exact replays: deterministic kernels, one thread on the CPU.
    torch.use_deterministic_algorithms(True)
    torch.set_num_threads(1)
    device = torch.device("cuda:0" if torch.cuda.is_available() else "cpu")

    stop_requested = False

    def request_stop(signum, _frame):
        nonlocal stop_requested
        stop_requested = True

    signal.signal(signal.SIGTERM, request_stop)

    torch.manual_seed(int.from_bytes(hashlib.sha256(b"depinchain/example-pytorch/init" + seed).digest()[:8], "little"))
    model = CharModel()
    if env["DEPIN_RESUME_FROM"]:
        with open(os.path.join(env["DEPIN_RESUME_FROM"], "state"), "rb") as f:
            deserialize(model, f.read())
    model.to(device)
    optimizer = torch.optim.SGD(model.parameters(), lr=LEARNING_RATE)  # stateless: the weights are the whole state
    data = read_data(env["DEPIN_DATA_DIR"]).to(device)
    offsets = torch.arange(CONTEXT + 1, device=device)

    print(f"job {env['DEPIN_JOB_ID']} lease {env['DEPIN_LEASE_ID']}: steps {start} to {total} on {device}, "
          f"CUDA_VISIBLE_DEVICES={os.environ.get('CUDA_VISIBLE_DEVICES')!r}", flush=True)
    os.makedirs(output_dir, exist_ok=True)
    with open(os.path.join(output_dir, "metrics.jsonl"), "a") as metrics:
        step = start
        state = serialize(model)
        trace = [hashlib.sha256(state).digest()]
        while step < total:
            if stop_requested:
                fail(f"stopped by SIGTERM after step {step}")
            windows = data[batch_starts(seed, step, len(data) - CONTEXT).to(device)[:, None] + offsets]
            loss = nn.functional.cross_entropy(model(windows[:, :CONTEXT]), windows[:, CONTEXT])
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
            step += 1
            state = serialize(model)
            trace.append(hashlib.sha256(state).digest())
            metrics.write(json.dumps({"step": step, "loss": loss.item()}) + "\n")
            if step == total or (step - start) % interval == 0:
                metrics.flush()
                write_checkpoint(output_dir, step, state, trace)
                trace = trace[-1:]
    write_synced(os.path.join(output_dir, "DONE"), b"")


if __name__ == "__main__":
    main()
