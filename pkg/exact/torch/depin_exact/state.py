"""The canonical state file (pkg/exact/state.go): layout, encode, decode,
Merkle root (h_i) and initialisation from the seed."""
import hashlib
import struct

import numpy as np
import torch

from .config import CONFIG_ENCODED_SIZE, Config, Hyper, init_radius, params
from .graph import TensorSpec, state_tensor_spec
from .merkle import CHUNK_SIZE, root_of_bytes

MAGIC = b"DPXSTATE"
VERSION = 1
OFF_STEP, OFF_LOSS, OFF_DIGEST, OFF_CONFIG = 16, 24, 32, 64
OFF_COUNT = OFF_CONFIG + CONFIG_ENCODED_SIZE
OFF_TABLE = OFF_COUNT + 8
TABLE_ENTRY = 64
NP = {"u8": "<u1", "i8": "<i1", "i16": "<i2", "i32": "<i4", "i64": "<i8"}
DTYPE_CODE = {"u8": 1, "i8": 2, "i16": 3, "i32": 4, "i64": 5}
INIT_DOMAIN = b"depinchain/exact/init/v1"
MAX_LOSS_TOK = (1 << 40) - 1


def align(n):
    return (n + CHUNK_SIZE - 1) // CHUNK_SIZE * CHUNK_SIZE


class Layout:
    def __init__(self, cfg: Config):
        self.specs = []
        for p in params(cfg):
            for sfx in ("w", "m", "v"):
                dt, frac, shape = state_tensor_spec(p, sfx)
                self.specs.append(TensorSpec(len(self.specs), p.name + "." + sfx, dt, shape, frac))
        self.header = OFF_TABLE + TABLE_ENTRY * len(self.specs)
        off = align(self.header)
        self.offsets = []
        for i, s in enumerate(self.specs):
            self.offsets.append(off)
            off += s.nbytes()
            if i + 1 < len(self.specs):
                off = align(off)
        self.size = off

    def header_bytes(self, hyp: Hyper, step: int, loss: int) -> bytes:
        buf = bytearray(self.header)
        buf[0:8] = MAGIC
        struct.pack_into("<IIQq", buf, 8, VERSION, self.header, step, loss)
        buf[OFF_DIGEST:OFF_DIGEST + 32] = hyp.digest()
        buf[OFF_CONFIG:OFF_CONFIG + CONFIG_ENCODED_SIZE] = hyp.encode()
        struct.pack_into("<II", buf, OFF_COUNT, len(self.specs), 0)
        for i, s in enumerate(self.specs):
            e = OFF_TABLE + i * TABLE_ENTRY
            buf[e:e + len(s.name)] = s.name.encode()
            struct.pack_into("<BB6xIIQQ", buf, e + 32, DTYPE_CODE[s.dtype], len(s.shape), s.shape[0], s.shape[1],
                             self.offsets[i], s.nbytes())
        return bytes(buf)


def tensor_bytes(t: torch.Tensor, dtype: str) -> bytes:
    return t.detach().to("cpu").reshape(-1).numpy().astype(NP[dtype]).tobytes()


class State:
    """config, step, loss (Q30) and tensors (name -> int64 tensor) in
    canonical order."""

    def __init__(self, cfg: Config, step: int, loss: int, tensors: dict):
        self.config, self.step, self.loss, self.tensors = cfg, step, loss, tensors

    def encode(self) -> bytes:
        lay = Layout(self.config)
        buf = bytearray(lay.size)
        buf[:lay.header] = lay.header_bytes(self.config.hyper(), self.step, self.loss)
        for s, off in zip(lay.specs, lay.offsets):
            b = tensor_bytes(self.tensors[s.name], s.dtype)
            buf[off:off + len(b)] = b
        return bytes(buf)

    def root(self) -> bytes:
        return root_of_bytes(self.encode())

    def to(self, device):
        return State(self.config, self.step, self.loss, {k: v.to(device) for k, v in self.tensors.items()})


def decode(b: bytes) -> State:
    if len(b) < OFF_TABLE or b[:8] != MAGIC:
        raise ValueError("not a depinchain exact state (bad magic)")
    version, = struct.unpack_from("<I", b, 8)
    if version != VERSION:
        raise ValueError(f"state version {version}, want {VERSION}")
    hyp = Hyper.decode(b[OFF_CONFIG:OFF_CONFIG + CONFIG_ENCODED_SIZE])
    cfg = hyp.config()
    if hyp.digest() != b[OFF_DIGEST:OFF_DIGEST + 32]:
        raise ValueError("config digest does not match the config")
    lay = Layout(cfg)
    if len(b) != lay.size:
        raise ValueError(f"{len(b)} bytes, the config's state has {lay.size}")
    step, loss = struct.unpack_from("<Qq", b, OFF_STEP)
    if b[:lay.header] != lay.header_bytes(hyp, step, loss):
        raise ValueError("state header does not match the config's layout")
    if not (0 <= loss <= MAX_LOSS_TOK) or (step == 0 and loss != 0):
        raise ValueError(f"loss {loss} out of range for step {step}")
    tensors = {}
    prev = lay.header
    for s, off in zip(lay.specs, lay.offsets):
        if any(b[prev:off]):
            raise ValueError(f"non-zero padding before {s.name}")
        arr = np.frombuffer(b, dtype=NP[s.dtype], count=s.elems(), offset=off).astype(np.int64)
        if s.dtype == "i32" and (arr == -(1 << 31)).any():
            raise ValueError(f"{s.name}: value outside the s32 range")
        if s.dtype == "i64" and ((arr < 0) | (arr > (1 << 62) - 1)).any():
            raise ValueError(f"{s.name}: value outside [0, 2^62)")
        tensors[s.name] = torch.from_numpy(arr.copy()).reshape(s.shape)
        prev = off + s.nbytes()
    return State(cfg, step, loss, tensors)


def fill_uniform(n: int, seed: bytes, name: str, R: int) -> np.ndarray:
    prefix = INIT_DOMAIN + struct.pack("<Q", len(seed)) + seed + struct.pack("<I", len(name)) + name.encode()
    nblocks = (n + 3) // 4
    words = np.frombuffer(b"".join(hashlib.sha256(prefix + struct.pack("<Q", i)).digest() for i in range(nblocks)),
                          dtype="<u8")[:n]
    span = np.uint64(2 * R + 1)
    return (words % span).astype(np.int64) - R


def init_state(cfg: Config, seed: bytes) -> State:
    hyp = cfg.hyper()
    tensors = {}
    for p in params(cfg):
        R = init_radius(hyp, p)
        tensors[p.name + ".w"] = torch.from_numpy(fill_uniform(p.rows * p.cols, seed, p.name, R)).reshape(p.rows, p.cols)
        tensors[p.name + ".m"] = torch.zeros(p.rows, p.cols, dtype=torch.int64)
        tensors[p.name + ".v"] = torch.zeros(p.rows, p.cols, dtype=torch.int64)
    return State(cfg, 0, 0, tensors)
