"""Runs a graph op by op on one device, optionally data-parallel."""
import torch

from .kernels import KERNELS
from .graph import train_graph, forward_graph
from .state import State, tensor_bytes
from .merkle import root_of_bytes

_GRAPHS = {}


def cached_train_graph(cfg):
    key = cfg.hyper()
    g = _GRAPHS.get(key)
    if g is None:
        g = _GRAPHS[key] = train_graph(cfg)
    return g


def tensor_root(t: torch.Tensor, dtype: str) -> bytes:
    return root_of_bytes(tensor_bytes(t, dtype))


def run_ops(g, env, ops, observer=None):
    """Runs ops (a sub-list of g.ops, in order) on env (id -> tensor),
    freeing intermediates after their last reader."""
    for op in ops:
        spec = g.tensors[op.output]
        ins = [env[i] for i in op.inputs]
        out = KERNELS[op.kind](op, ins, [g.tensors[i] for i in op.inputs], spec)
        out = out.reshape(spec.shape)
        env[op.output] = out
        if observer is not None:
            observer(op, out)
        for i in op.inputs:
            if g.last_use[i] == op.index and i not in g.keep:
                env.pop(i, None)
    return env


def step_inputs(g, state: State, batch, device):
    cfg = state.config
    if len(batch) != cfg.batch:
        raise ValueError(f"batch has {len(batch)} windows, want {cfg.batch}")
    env = {g.id("step"): torch.tensor([state.step], dtype=torch.int64, device=device)}
    mb = cfg.micro_batch
    for k in range(cfg.micro_batches):
        rows = batch[k * mb:(k + 1) * mb]
        for w in rows:
            if len(w) != cfg.context + 1:
                raise ValueError(f"window of {len(w)} bytes, want {cfg.context + 1}")
        data = torch.frombuffer(bytearray(b"".join(rows)), dtype=torch.uint8).to(torch.int64)
        env[g.id(f"mb{k}.window")] = data.reshape(mb, cfg.context + 1).to(device)
    for name, t in state.tensors.items():
        env[g.id(name)] = t.to(device)
    return env


def step(state: State, batch, device="cpu", observer=None, dist=None):
    """One training step; returns the next State (tensors on device).

    dist, when given, is (rank, world, all_reduce) where all_reduce sums an
    int64 tensor across processes in place: rank r runs the micro-batches
    k with k % world == r, and the exact integer gradient and loss sums are
    all-reduced instead of running the accum phase, which gives the same
    integers as one process (integer addition is associative and no sum
    can reach the saturation bound)."""
    cfg = state.config
    g = cached_train_graph(cfg)
    env = step_inputs(g, state, batch, device)
    if dist is None:
        run_ops(g, env, g.ops, observer)
    else:
        rank, world, all_reduce = dist
        run_ops(g, env, [o for o in g.ops if o.phase == "prologue"], observer)
        names = list(g.final_grads)
        sums = None
        loss = None
        for k in range(cfg.micro_batches):
            if k % world != rank:
                continue
            run_ops(g, env, [o for o in g.ops if o.phase == "micro" and o.micro == k], observer)
            grads = {n: env.pop(grad_id(g, k, n)) for n in names}
            lk = env.pop(g.id(f"mb{k}.loss"))
            if sums is None:
                sums, loss = grads, lk
            else:
                for n in names:
                    sums[n] = sums[n] + grads[n]
                loss = loss + lk
        if sums is None:  # more processes than micro-batches: contribute zeros
            sums = {n: torch.zeros(g.tensors[g.final_grads[n]].shape, dtype=torch.int64, device=device) for n in names}
            loss = torch.zeros(1, dtype=torch.int64, device=device)
        flat = torch.cat([sums[n].reshape(-1) for n in names] + [loss.reshape(-1)])
        all_reduce(flat)
        off = 0
        for n in names:
            spec = g.tensors[g.final_grads[n]]
            env[g.final_grads[n]] = flat[off:off + spec.elems()].reshape(spec.shape)
            off += spec.elems()
        env[g.final_loss] = flat[off:off + 1]
        run_ops(g, env, [o for o in g.ops if o.phase == "update"], observer)
    tensors = {name: env[g.id("next." + name)] for name in state.tensors}
    loss = int(env[g.id("loss")].reshape(-1)[0].item())
    return State(cfg, state.step + 1, loss, tensors)


def grad_id(g, k, name):
    """The tensor holding micro-batch k's gradient of parameter name."""
    if name == "head":
        return g.id(f"mb{k}.g.head.dW")
    if name in ("tok_emb", "pos_emb"):
        return g.id(f"mb{k}.g.{name}.dW")
    layer, kind = name.split(".")
    sub = {"attn_qkv": "qkv", "attn_out": "attn_proj", "mlp_in": "mlp_in", "mlp_out": "mlp_proj"}[kind]
    return g.id(f"mb{k}.g.{layer}.{sub}.dW")


def forward(state_tensors, cfg, window_bytes, device="cpu"):
    """Exact forward pass over windows ([B][T+1] bytes): (logits, loss_tok)."""
    B, T1 = len(window_bytes), len(window_bytes[0])
    g = forward_graph(cfg, B, T1 - 1)
    env = {g.id("window"): torch.frombuffer(bytearray(b"".join(window_bytes)), dtype=torch.uint8)
           .to(torch.int64).reshape(B, T1).to(device)}
    for p in g.inputs[1:]:
        env[p] = state_tensors[g.tensors[p].name].to(device)
    run_ops(g, env, g.ops)
    return env[g.id("logits")], env[g.id("loss_tok")]
