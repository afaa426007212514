"""RFC 6962 Merkle roots over fixed-size chunks, as pkg/merkle computes them."""
import hashlib

CHUNK_SIZE = 4096


def leaf_hash(data: bytes) -> bytes:
    return hashlib.sha256(b"\x00" + data).digest()


def node_hash(left: bytes, right: bytes) -> bytes:
    return hashlib.sha256(b"\x01" + left + right).digest()


def root_of_leaf_hashes(leaves):
    """Root of the RFC 6962 tree with the given leaf hashes (a compact
    range folded as in pkg/merkle.Builder)."""
    if not leaves:
        return hashlib.sha256(b"").digest()
    stack = []  # (size, hash), sizes strictly decreasing powers of two
    for h in leaves:
        size = 1
        while stack and stack[-1][0] == size:
            s, left = stack.pop()
            h = node_hash(left, h)
            size *= 2
        stack.append((size, h))
    root = stack[-1][1]
    for _, h in reversed(stack[:-1]):
        root = node_hash(h, root)
    return root


def root_of_bytes(data, chunk_size=CHUNK_SIZE) -> bytes:
    mv = memoryview(data)
    return root_of_leaf_hashes([leaf_hash(mv[i:i + chunk_size]) for i in range(0, len(mv), chunk_size)])
