"""Training together (DiLoCo rounds), pkg/diloco in PyTorch: the section
layout, the exact pseudo-gradient, top-k compression with error feedback and
the chunk-local outer Nesterov step, producing the same files (and so the
same Merkle roots) as the Go package. docs/training-together.md is the
specification."""
import struct

import numpy as np
import torch

from .arith import DIV, MAX32, clamp32, rs
from .config import CONFIG_ENCODED_SIZE, Hyper, params
from .merkle import CHUNK_SIZE, root_of_bytes
from .state import State

MAGIC = b"DPXDLOCO"
VERSION = 1
KIND_PSEUDO_GRADIENT, KIND_GLOBAL, KIND_COMPRESSED = 1, 2, 3
CHUNK_ELEMS = CHUNK_SIZE // 4
OFF_KIND, OFF_ROUND, OFF_WORKER, OFF_DIGEST, OFF_CONFIG = 12, 16, 24, 32, 64
OFF_SYNC = OFF_CONFIG + CONFIG_ENCODED_SIZE
OFF_BASE = OFF_SYNC + 32
OFF_CHUNKS = OFF_BASE + 32
OFF_ERR_IN = OFF_CHUNKS + 8
OFF_ERR_OUT = OFF_ERR_IN + 32
ZERO_ROOT = bytes(32)
Q_OUTER = 30
ENTRY_BYTES = 6
MAX_WORKERS = 1 << 16


class Layout:
    """Each trainable parameter (params order) starts on a chunk boundary of
    a flat int32 section."""

    def __init__(self, cfg):
        self.tensors, self.chunks = [], 0
        for p in params(cfg):
            n = p.rows * p.cols
            self.tensors.append((p.name, self.chunks, n))
            self.chunks += (n + CHUNK_ELEMS - 1) // CHUNK_ELEMS

    def elems(self):
        return self.chunks * CHUNK_ELEMS

    def valid(self, k):
        for _, first, n in self.tensors:
            if first <= k < first + (n + CHUNK_ELEMS - 1) // CHUNK_ELEMS:
                return min(CHUNK_ELEMS, n - (k - first) * CHUNK_ELEMS)
        return 0

    def weights(self, state):
        out = torch.zeros(self.elems(), dtype=torch.int64)
        for name, first, n in self.tensors:
            out[first * CHUNK_ELEMS:first * CHUNK_ELEMS + n] = state.tensors[name + ".w"].to("cpu").reshape(-1)
        return out


class Header:
    def __init__(self, kind, rnd, worker, hyp, sync, base, chunks, err_in=ZERO_ROOT, err_out=ZERO_ROOT):
        self.kind, self.round, self.worker, self.hyper = kind, rnd, worker, hyp
        self.sync, self.base, self.chunks = tuple(sync), base, chunks  # sync: every, outer_lr, outer_momentum, top_k
        # A compressed pseudo-gradient's error-buffer roots (in, out); zero otherwise.
        self.err_in, self.err_out = err_in, err_out

    def encode(self):
        b = bytearray(CHUNK_SIZE)
        b[0:8] = MAGIC
        struct.pack_into("<IIQI", b, 8, VERSION, self.kind, self.round, self.worker)
        b[OFF_DIGEST:OFF_DIGEST + 32] = self.hyper.digest()
        b[OFF_CONFIG:OFF_SYNC] = self.hyper.encode()
        struct.pack_into("<4q", b, OFF_SYNC, *self.sync)
        b[OFF_BASE:OFF_BASE + 32] = self.base
        struct.pack_into("<Q", b, OFF_CHUNKS, self.chunks)
        b[OFF_ERR_IN:OFF_ERR_IN + 32] = self.err_in
        b[OFF_ERR_OUT:OFF_ERR_OUT + 32] = self.err_out
        return bytes(b)

    @staticmethod
    def decode(b):
        if len(b) < CHUNK_SIZE or b[:8] != MAGIC:
            raise ValueError("not a diloco file (bad magic)")
        version, kind, rnd, worker = struct.unpack_from("<IIQI", b, 8)
        if version != VERSION:
            raise ValueError(f"version {version}, want {VERSION}")
        hyp = Hyper.decode(b[OFF_CONFIG:OFF_SYNC])
        sync = struct.unpack_from("<4q", b, OFF_SYNC)
        chunks, = struct.unpack_from("<Q", b, OFF_CHUNKS)
        h = Header(kind, rnd, worker, hyp, sync, bytes(b[OFF_BASE:OFF_BASE + 32]), chunks,
                   bytes(b[OFF_ERR_IN:OFF_ERR_IN + 32]), bytes(b[OFF_ERR_OUT:OFF_ERR_OUT + 32]))
        if kind != KIND_COMPRESSED and (h.err_in != ZERO_ROOT or h.err_out != ZERO_ROOT):
            raise ValueError("only a compressed pseudo-gradient carries error-buffer roots")
        if h.encode() != bytes(b[:CHUNK_SIZE]) or chunks != Layout(hyp.config()).chunks:
            raise ValueError("header is not canonical")
        return h


def section_bytes(t: torch.Tensor) -> bytes:
    return t.to("cpu").numpy().astype("<i4").tobytes()


def read_section(b, n) -> torch.Tensor:
    arr = np.frombuffer(b, dtype="<i4", count=n).astype(np.int64)
    if (arr == -(1 << 31)).any():
        raise ValueError("value outside the s32 range")
    return torch.from_numpy(arr.copy())


def decode_global(b):
    h = Header.decode(b)
    if h.kind != KIND_GLOBAL:
        raise ValueError(f"kind {h.kind} is not a global state")
    n = Layout(h.hyper.config()).elems()
    if len(b) != CHUNK_SIZE + 8 * n:
        raise ValueError("global state has the wrong length")
    return h, read_section(b[CHUNK_SIZE:], n), read_section(b[CHUNK_SIZE + 4 * n:], n)


def encode_global(h, w, u):
    return h.encode() + section_bytes(w) + section_bytes(u)


def decode_pseudo_gradient(b):
    """A dense or compressed pseudo-gradient file: (header, dense delta)."""
    h = Header.decode(b)
    lay = Layout(h.hyper.config())
    if h.kind == KIND_PSEUDO_GRADIENT:
        if len(b) != CHUNK_SIZE + 4 * lay.elems():
            raise ValueError("pseudo-gradient has the wrong length")
        return h, read_section(b[CHUNK_SIZE:], lay.elems())
    if h.kind != KIND_COMPRESSED or h.sync[3] < 1:
        raise ValueError(f"kind {h.kind} is not a pseudo-gradient")
    k = h.sync[3]
    rec = k * ENTRY_BYTES
    if len(b) != CHUNK_SIZE + lay.chunks * rec:
        raise ValueError("compressed pseudo-gradient has the wrong length")
    ent = np.frombuffer(b, dtype=np.dtype([("i", "<u2"), ("v", "<i4")]), count=lay.chunks * k, offset=CHUNK_SIZE)
    idx = torch.from_numpy(ent["i"].astype(np.int64)).reshape(lay.chunks, k)
    val = torch.from_numpy(ent["v"].astype(np.int64)).reshape(lay.chunks, k)
    valid = torch.tensor([lay.valid(c) for c in range(lay.chunks)]).unsqueeze(1)
    if ((idx[:, 1:] <= idx[:, :-1]).any() or (idx >= CHUNK_ELEMS).any() or (val < -MAX32).any()
            or ((idx >= valid) & (val != 0)).any()):
        raise ValueError("malformed compressed record")
    dense = torch.zeros(lay.chunks, CHUNK_ELEMS, dtype=torch.int64)
    dense.scatter_(1, idx, val)
    _, canon, _ = compress_chunks(dense, torch.zeros_like(dense), k)
    if canon != bytes(b[CHUNK_SIZE:]):
        raise ValueError("compressed record is not canonical")
    return h, dense.reshape(-1)


def compress_chunks(delta, err, k):
    """Top-k per chunk with error feedback on [chunks, 1024] tensors:
    a = clamp32(delta + err); keep the k largest |a| (ties: lower index);
    returns (sent, records bytes, new error buffer)."""
    a = clamp32(delta + err)
    order = torch.sort(-a.abs(), dim=1, stable=True).indices[:, :k]
    kept = torch.sort(order, dim=1).values
    vals = torch.gather(a, 1, kept)
    sent = torch.zeros_like(a).scatter_(1, kept, vals)
    rec = np.zeros(kept.numel(), dtype=np.dtype([("i", "<u2"), ("v", "<i4")]))
    rec["i"] = kept.reshape(-1).numpy()
    rec["v"] = vals.reshape(-1).numpy()
    return sent, rec.tobytes(), a - sent


def error_buffer_root(e):
    """The commitment to an error buffer: the chunk root of its section."""
    return root_of_bytes(section_bytes(e))


def compressed_file(h, sent, err_in, err_out):
    """The served compressed file (header naming the error buffers' roots,
    then the records) and its root: the file's chunk root, as every file's."""
    k = h.sync[3]
    hc = Header(KIND_COMPRESSED, h.round, h.worker, h.hyper, h.sync, h.base, h.chunks,
                error_buffer_root(err_in), error_buffer_root(err_out)).encode()
    _, recs, _ = compress_chunks(sent.reshape(-1, CHUNK_ELEMS), torch.zeros_like(sent).reshape(-1, CHUNK_ELEMS), k)
    b = hc + recs
    return b, root_of_bytes(b)


def pseudo_gradient(global_bytes, local_state, worker, err=None):
    """Worker's pseudo-gradient of the round global_bytes starts: clamp32(
    global − local weights). Dense file when top_k is 0, else the
    compressed file with error feedback from err (a section tensor or None);
    returns (file bytes, root, new error buffer or None)."""
    h, gw, _ = decode_global(global_bytes)
    cfg = h.hyper.config()
    every = h.sync[0]
    if local_state.config.hyper() != h.hyper or local_state.step != (h.round + 1) * every:
        raise ValueError("local state is not the end of this round")
    lay = Layout(cfg)
    delta = clamp32(gw - lay.weights(local_state))
    ph = Header(KIND_PSEUDO_GRADIENT, h.round, worker, h.hyper, h.sync, root_of_bytes(global_bytes), lay.chunks)
    if h.sync[3] == 0:
        b = ph.encode() + section_bytes(delta)
        return b, root_of_bytes(b), None
    if err is None:
        err = torch.zeros_like(delta)
    sent, _, new_err = compress_chunks(delta.reshape(-1, CHUNK_ELEMS), err.reshape(-1, CHUNK_ELEMS), h.sync[3])
    new_err = new_err.reshape(-1)
    b, root = compressed_file(ph, sent.reshape(-1), err, new_err)
    return b, root, new_err


def aggregate(global_bytes, pg_files):
    """The next global state from the pseudo-gradients (dense or compressed)
    of the workers that entered the round, in strictly ascending worker
    order: avg = DIV(Σ Δ, n); u' = clamp32(RS(μu, 30) + avg);
    w' = clamp32(w − RS(η(RS(μu', 30) + avg), 30))."""
    h, w, u = decode_global(global_bytes)
    base = root_of_bytes(global_bytes)
    if not pg_files:
        raise ValueError("no pseudo-gradients")
    total = torch.zeros_like(w)
    prev = -1
    for b in pg_files:
        ph, d = decode_pseudo_gradient(b)
        if ph.round != h.round or ph.hyper != h.hyper or ph.sync != h.sync or ph.base != base:
            raise ValueError(f"pseudo-gradient of worker {ph.worker} is not of this round's global state")
        if ph.worker <= prev:
            raise ValueError("workers must be strictly ascending")
        prev = ph.worker
        total += d
    _, lr, mu, _ = h.sync
    avg = DIV(total, len(pg_files))
    u = clamp32(rs(mu * u, Q_OUTER) + avg)
    w = clamp32(w - rs(lr * (rs(mu * u, Q_OUTER) + avg), Q_OUTER))
    nh = Header(KIND_GLOBAL, h.round + 1, 0, h.hyper, h.sync, bytes(32), h.chunks)
    return encode_global(nh, w, u)


def worker_start(global_bytes, carry=None):
    """A worker's state at the start of the global state's round: the global
    weights, the Adam moments of carry (its end state of the last round it
    entered; None for a joiner: zero moments), step round*every, loss 0
    (GlobalState.WorkerStart)."""
    h, w, _ = decode_global(global_bytes)
    cfg = h.hyper.config()
    if carry is not None and carry.config.hyper() != h.hyper:
        raise ValueError("the carry state is not of the global state's configuration")
    tensors = {}
    for p, (_, first, n) in zip(params(cfg), Layout(cfg).tensors):
        tensors[p.name + ".w"] = w[first * CHUNK_ELEMS:first * CHUNK_ELEMS + n].clone().reshape(p.rows, p.cols)
        for sfx in (".m", ".v"):
            tensors[p.name + sfx] = (carry.tensors[p.name + sfx].clone() if carry is not None
                                     else torch.zeros(p.rows, p.cols, dtype=torch.int64))
    return State(cfg, h.round * h.sync[0], 0, tensors)
