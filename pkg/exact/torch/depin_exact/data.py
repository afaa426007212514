"""Training data: the stream of a data directory and a step's batch windows."""
import hashlib
import os
import struct

BATCH_DOMAIN = b"depinchain/exact/batch/v1"


def read_stream_dir(d: str) -> bytes:
    """Regular files directly in d, in byte-wise name order, concatenated."""
    names = sorted((n for n in os.listdir(d) if os.path.isfile(os.path.join(d, n)) and not os.path.islink(os.path.join(d, n))),
                   key=lambda n: n.encode())
    out = bytearray()
    for n in names:
        with open(os.path.join(d, n), "rb") as f:
            out += f.read()
    return bytes(out)


def batch_windows(cfg, seed: bytes, step: int, stream_size: int):
    wl = cfg.context + 1
    if stream_size < wl:
        raise ValueError(f"{stream_size} bytes of data, need at least context+1 = {wl}")
    starts = stream_size - cfg.context
    prefix = BATCH_DOMAIN + struct.pack("<Q", len(seed)) + seed + struct.pack("<Q", step)
    out = []
    for k in range(cfg.batch):
        d = hashlib.sha256(prefix + struct.pack("<I", k)).digest()
        out.append((struct.unpack("<Q", d[:8])[0] % starts, wl))
    return out


def step_batch(cfg, seed: bytes, step: int, stream: bytes):
    return [stream[s:s + n] for s, n in batch_windows(cfg, seed, step, len(stream))]
