"""A small safetensors reader/writer (Debian's torch 1.13 ships without the
safetensors package) and the weight import rule of the spec."""
import json
import math
import struct

import numpy as np
import torch

from .config import params
from .state import State

NP = {"F32": "<f4", "F64": "<f8", "F16": "<f2"}
MAX32 = (1 << 31) - 1


def read_safetensors(path):
    """name -> float64 tensor (F32, F64, F16 and BF16 convert exactly)."""
    with open(path, "rb") as f:
        b = f.read()
    n, = struct.unpack_from("<Q", b, 0)
    if n > len(b) - 8:
        raise ValueError("safetensors header length exceeds the file")
    header = json.loads(b[8:8 + n])
    data = memoryview(b)[8 + n:]
    out = {}
    for name, e in header.items():
        if name == "__metadata__":
            continue
        lo, hi = e["data_offsets"]
        raw = data[lo:hi]
        if e["dtype"] == "BF16":
            arr = (np.frombuffer(raw, dtype="<u2").astype(np.uint32) << 16).view(np.float32)
        elif e["dtype"] in NP:
            arr = np.frombuffer(raw, dtype=NP[e["dtype"]])
        else:
            raise ValueError(f"{name}: dtype {e['dtype']} not supported")
        out[name] = torch.from_numpy(arr.astype(np.float64)).reshape(e["shape"])
    return out


def write_safetensors(path, tensors: dict, metadata=None):
    header, blobs, off = {}, [], 0
    if metadata:
        header["__metadata__"] = metadata
    for name in sorted(tensors):
        a = tensors[name].detach().to("cpu").to(torch.float32).contiguous().numpy().astype("<f4").tobytes()
        header[name] = {"dtype": "F32", "shape": list(tensors[name].shape), "data_offsets": [off, off + len(a)]}
        blobs.append(a)
        off += len(a)
    hj = json.dumps(header, separators=(",", ":")).encode()
    hj += b" " * (-len(hj) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(hj)) + hj + b"".join(blobs))


def quantize_weight(x: torch.Tensor) -> torch.Tensor:
    """clamp32(floor(x * 2^28 + 1/2)) in float64, as pkg/exact QuantizeWeight."""
    x = x.to(torch.float64)
    if not torch.isfinite(x).all():
        raise ValueError("weights contain NaN or infinity")
    v = torch.floor(x * float(1 << 28) + 0.5)  # scaling by 2^28 is exact
    return v.clamp(min=-MAX32, max=MAX32).to(torch.int64)


def import_weights(cfg, path) -> State:
    ws = read_safetensors(path)
    ps = params(cfg)
    if set(ws) != {p.name for p in ps}:
        raise ValueError(f"safetensors tensors {sorted(ws)} do not match the config's parameters")
    tensors = {}
    for p in ps:
        w = ws[p.name]
        if list(w.shape) != [p.rows, p.cols]:
            raise ValueError(f"{p.name} has shape {list(w.shape)}, want {[p.rows, p.cols]}")
        tensors[p.name + ".w"] = quantize_weight(w)
        tensors[p.name + ".m"] = torch.zeros(p.rows, p.cols, dtype=torch.int64)
        tensors[p.name + ".v"] = torch.zeros(p.rows, p.cols, dtype=torch.int64)
    return State(cfg, 0, 0, tensors)


def export_float(state: State):
    """name -> float64 weights (raw * 2^-28, exact)."""
    return {p.name: state.tensors[p.name + ".w"].to(torch.float64) / float(1 << 28) for p in params(state.config)}
