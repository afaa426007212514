"""The operator graph, built exactly as pkg/exact/model.go builds it (the
tests compare the JSON of both)."""
import json

from .arith import FRAC_ACT, FRAC_GRAD, FRAC_PROB, FRAC_W, FRAC_V, MAX32, MAX_GRAD_PART, ONE30
from .config import Config, attn_scale, params

SCHED_LEN = 4
DSIZE = {"u8": 1, "i8": 1, "i16": 2, "i32": 4, "i64": 8}


class TensorSpec:
    __slots__ = ("id", "name", "dtype", "shape", "frac")

    def __init__(self, id, name, dtype, shape, frac):
        self.id, self.name, self.dtype, self.shape, self.frac = id, name, dtype, list(shape), frac

    def elems(self):
        n = 1
        for d in self.shape:
            n *= d
        return n

    def cols(self):
        return self.shape[-1]

    def rows(self):
        return self.elems() // self.cols()

    def nbytes(self):
        return self.elems() * DSIZE[self.dtype]


class Op:
    __slots__ = ("index", "kind", "inputs", "output", "attrs", "phase", "micro")

    def __init__(self, index, kind, inputs, output, attrs, phase, micro):
        self.index, self.kind, self.inputs, self.output = index, kind, list(inputs), output
        self.attrs, self.phase, self.micro = attrs or [], phase, micro

    def attr(self, key):
        for k, v in self.attrs:
            if k == key:
                return v
        raise KeyError(f"op {self.index} ({self.kind}) has no attribute {key}")


class Graph:
    def __init__(self, cfg):
        self.config = cfg
        self.tensors = []
        self.ops = []
        self.by_name = {}
        self.inputs = []
        self.outputs = []

    def id(self, name):
        return self.by_name[name]

    def to_json(self):
        ts = [{"id": t.id, "name": t.name, "dtype": t.dtype, "shape": t.shape, "frac": t.frac} for t in self.tensors]
        ops = [{"index": o.index, "kind": o.kind, "inputs": o.inputs, "output": o.output,
                "attrs": [{"k": k, "v": v} for k, v in o.attrs], "phase": o.phase, "micro": o.micro}
               for o in self.ops]
        return json.dumps({"tensors": ts, "ops": ops}, separators=(",", ":"))

    def finish(self):
        self.last_use = [-1] * len(self.tensors)
        for op in self.ops:
            for i in op.inputs:
                self.last_use[i] = op.index
        self.keep = set(self.inputs) | set(self.outputs)
        return self


class Builder:
    def __init__(self, cfg: Config):
        self.g = Graph(cfg)
        self.phase = ""
        self.micro = -1
        self.cfg = cfg
        self.hyp = cfg.hyper()
        self.params = params(cfg)
        self.w, self.wq, self.wtq = {}, {}, {}

    # -- generic --------------------------------------------------------------
    def tensor(self, name, dtype, frac, *shape):
        if name in self.g.by_name:
            raise ValueError("duplicate tensor " + name)
        t = TensorSpec(len(self.g.tensors), name, dtype, shape, frac)
        self.g.tensors.append(t)
        self.g.by_name[name] = t.id
        return t.id

    def input(self, name, dtype, frac, *shape):
        i = self.tensor(name, dtype, frac, *shape)
        self.g.inputs.append(i)
        return i

    def spec(self, i):
        return self.g.tensors[i]

    def op(self, kind, out, attrs, *inputs):
        self.g.ops.append(Op(len(self.g.ops), kind, inputs, out, attrs, self.phase, self.micro))
        return out

    def quantize(self, x):
        s = self.spec(x)
        e = self.op("qexp", self.tensor(s.name + ".e", "i8", 0, s.rows()), [("frac", s.frac)], x)
        q = self.op("qmant", self.tensor(s.name + ".q", "i16", 0, *s.shape), [("frac", s.frac)], x, e)
        return (q, e)

    def matmul(self, name, a, b, frac, bound):
        as_, bs = self.spec(a[0]).shape, self.spec(b[0]).shape
        dt = "i32" if bound == MAX32 else "i64"
        shape = [as_[0], as_[1], bs[1]] if len(as_) == 3 else [as_[0], bs[0]]
        out = self.tensor(name, dt, frac, *shape)
        return self.op("matmul", out, [("frac", frac), ("bound", bound)], a[0], a[1], b[0], b[1])

    def transpose(self, x, name):
        s = self.spec(x)
        shape = list(s.shape)
        shape[-1], shape[-2] = shape[-2], shape[-1]
        return self.op("transpose", self.tensor(name, s.dtype, s.frac, *shape), [], x)

    def unary(self, kind, name, x, attrs):
        s = self.spec(x)
        return self.op(kind, self.tensor(name, s.dtype, s.frac, *s.shape), attrs, x)

    def add(self, name, x, y):
        s = self.spec(x)
        bound = MAX32 if s.dtype != "i64" else (1 << 62) - 1
        return self.op("add", self.tensor(name, s.dtype, s.frac, *s.shape), [("bound", bound)], x, y)

    # -- model ----------------------------------------------------------------
    def prologue(self, backward):
        self.phase, self.micro = "prologue", -1
        for p in self.params:
            if not p.linear:
                continue
            w = self.w[p.name]
            self.wq[p.name] = self.quantize(w)
            if backward:
                self.wtq[p.name] = self.quantize(self.transpose(w, p.name + ".wT"))

    def forward(self, pre, window, batch, seq):
        c = self.cfg
        d, h, dh = c.d_model, c.heads, c.head_dim
        T, G = batch * seq, batch * h
        scale = attn_scale(dh)
        fo = {"window": window, "batch": batch, "seq": seq, "layers": []}
        x = self.op("embed", self.tensor(pre + "x0", "i32", FRAC_ACT, T, d), [], window, self.w["tok_emb"], self.w["pos_emb"])

        def norm(name, x):
            s = self.op("rms_scale", self.tensor(name + ".scale", "i64", 0, T, 3), [("eps", self.hyp.norm_eps)], x)
            y = self.op("rms_apply", self.tensor(name, "i32", FRAC_ACT, T, d), [], x, s)
            return s, y
        for i in range(c.layers):
            l, pn = f"{pre}l{i}.", f"l{i}."
            ls = {"x": x}
            ls["s1"], ls["h1"] = norm(l + "ln1", x)
            qkv = self.matmul(l + "qkv", self.quantize(ls["h1"]), self.wq[pn + "attn_qkv"], FRAC_ACT, MAX32)

            def split(part, name):
                return self.op("split_heads", self.tensor(l + name, "i32", FRAC_ACT, G, seq, dh),
                               [("heads", h), ("part", part), ("parts", 3), ("seq", seq)], qkv)
            ls["q"], ls["k"], ls["v"] = split(0, "q"), split(1, "k"), split(2, "v")
            scores = self.matmul(l + "scores", self.quantize(ls["q"]), self.quantize(ls["k"]), FRAC_ACT, MAX32)
            ls["p"] = self.op("softmax", self.tensor(l + "probs", "i32", FRAC_PROB, G, seq, seq), [("scale", scale)], scores)
            vT = self.transpose(ls["v"], l + "vT")
            o = self.matmul(l + "o", self.quantize(ls["p"]), self.quantize(vT), FRAC_ACT, MAX32)
            ls["att"] = self.op("merge_heads", self.tensor(l + "att", "i32", FRAC_ACT, T, d), [("heads", h)], o)
            ao = self.matmul(l + "attn_proj", self.quantize(ls["att"]), self.wq[pn + "attn_out"], FRAC_ACT, MAX32)
            ls["xmid"] = self.add(l + "xmid", x, ao)
            ls["s2"], ls["h2"] = norm(l + "ln2", ls["xmid"])
            ls["u"] = self.matmul(l + "mlp_pre", self.quantize(ls["h2"]), self.wq[pn + "mlp_in"], FRAC_ACT, MAX32)
            ls["r"] = self.unary("relu", l + "mlp_act", ls["u"], [])
            mo = self.matmul(l + "mlp_proj", self.quantize(ls["r"]), self.wq[pn + "mlp_out"], FRAC_ACT, MAX32)
            x = self.add(l + "xout", ls["xmid"], mo)
            fo["layers"].append(ls)
        fo["xL"] = x
        fo["sf"], fo["hf"] = norm(pre + "lnf", x)
        fo["logits"] = self.matmul(pre + "logits", self.quantize(fo["hf"]), self.wq["head"], FRAC_ACT, MAX32)
        return fo

    def linear_backward(self, name, param, dy, x):
        dx = self.matmul(name + ".dx", self.quantize(dy), self.wtq[param], FRAC_GRAD, MAX32)
        dyT = self.transpose(dy, name + ".dyT")
        xT = self.transpose(x, name + ".xT")
        dW = self.matmul(name + ".dW", self.quantize(dyT), self.quantize(xT), FRAC_GRAD, MAX_GRAD_PART)
        return dx, dW

    def backward(self, pre, fo, dlogits):
        c = self.cfg
        d, h, dh = c.d_model, c.heads, c.head_dim
        T, G, S = fo["batch"] * fo["seq"], fo["batch"] * h, fo["seq"]
        scale = attn_scale(dh)
        grads = {}

        def rms_back(name, dy, y, s):
            return self.op("rms_backward", self.tensor(name, "i32", FRAC_GRAD, T, d), [], dy, y, s)
        dhf, grads["head"] = self.linear_backward(pre + "g.head", "head", dlogits, fo["hf"])
        dx = rms_back(pre + "g.lnf", dhf, fo["hf"], fo["sf"])
        for i in range(c.layers - 1, -1, -1):
            l, pn = f"{pre}g.l{i}.", f"l{i}."
            ls = fo["layers"][i]
            dr, grads[pn + "mlp_out"] = self.linear_backward(l + "mlp_proj", pn + "mlp_out", dx, ls["r"])
            du = self.op("relu_backward", self.tensor(l + "mlp_pre", "i32", FRAC_GRAD, T, c.d_ff), [], dr, ls["u"])
            dh2, grads[pn + "mlp_in"] = self.linear_backward(l + "mlp_in", pn + "mlp_in", du, ls["h2"])
            dxmid = self.add(l + "xmid", dx, rms_back(l + "ln2", dh2, ls["h2"], ls["s2"]))
            datt, grads[pn + "attn_out"] = self.linear_backward(l + "attn_proj", pn + "attn_out", dxmid, ls["att"])
            dO = self.op("split_heads", self.tensor(l + "o", "i32", FRAC_GRAD, G, S, dh),
                         [("heads", h), ("part", 0), ("parts", 1), ("seq", S)], datt)
            dP = self.matmul(l + "probs", self.quantize(dO), self.quantize(ls["v"]), FRAC_GRAD, MAX32)
            dS = self.op("softmax_backward", self.tensor(l + "scores", "i32", FRAC_GRAD, G, S, S), [("scale", scale)], ls["p"], dP)
            kT = self.transpose(ls["k"], l + "kT")
            dq = self.matmul(l + "q", self.quantize(dS), self.quantize(kT), FRAC_GRAD, MAX32)
            dST = self.transpose(dS, l + "scoresT")
            qT = self.transpose(ls["q"], l + "qT")
            dk = self.matmul(l + "k", self.quantize(dST), self.quantize(qT), FRAC_GRAD, MAX32)
            pT = self.transpose(ls["p"], l + "probsT")
            dOT = self.transpose(dO, l + "oT")
            dv = self.matmul(l + "v", self.quantize(pT), self.quantize(dOT), FRAC_GRAD, MAX32)
            dqkv = self.op("merge_heads", self.tensor(l + "qkv", "i32", FRAC_GRAD, T, 3 * d), [("heads", h)], dq, dk, dv)
            dh1, grads[pn + "attn_qkv"] = self.linear_backward(l + "qkv", pn + "attn_qkv", dqkv, ls["h1"])
            dx = self.add(l + "x", dxmid, rms_back(l + "ln1", dh1, ls["h1"], ls["s1"]))
        dxT = self.transpose(dx, pre + "g.x0T")
        grads["tok_emb"] = self.op("embed_grad_tok", self.tensor(pre + "g.tok_emb.dW", "i64", FRAC_GRAD, c.vocab, d), [], fo["window"], dxT)
        grads["pos_emb"] = self.op("embed_grad_pos", self.tensor(pre + "g.pos_emb.dW", "i64", FRAC_GRAD, c.context, d), [], dxT)
        return grads


def state_tensor_spec(p, suffix):
    if suffix in ("w", "m"):
        return "i32", FRAC_W, [p.rows, p.cols]
    return "i64", FRAC_V, [p.rows, p.cols]


def train_graph(cfg: Config) -> Graph:
    b = Builder(cfg)
    hyp = b.hyp
    step = b.input("step", "i64", 0, 1)
    windows = [b.input(f"mb{k}.window", "u8", 0, cfg.micro_batch, cfg.context + 1) for k in range(cfg.micro_batches)]
    state = {}
    for p in b.params:
        for sfx in ("w", "m", "v"):
            dt, frac, shape = state_tensor_spec(p, sfx)
            state[p.name + "." + sfx] = b.input(p.name + "." + sfx, dt, frac, *shape)
        b.w[p.name] = state[p.name + ".w"]
    b.prologue(True)
    acc, loss_acc = {}, -1
    for k in range(cfg.micro_batches):
        b.phase, b.micro = "micro", k
        pre = f"mb{k}."
        fo = b.forward(pre, windows[k], cfg.micro_batch, cfg.context)
        T = cfg.micro_batch * cfg.context
        loss_tok = b.op("ce_loss", b.tensor(pre + "loss_tok", "i64", FRAC_PROB, T), [], fo["logits"], fo["window"])
        loss = b.op("sum", b.tensor(pre + "loss", "i64", FRAC_PROB, 1), [], loss_tok)
        dlogits = b.op("ce_grad", b.tensor(pre + "g.logits", "i32", FRAC_GRAD, T, cfg.vocab), [], fo["logits"], fo["window"])
        grads = b.backward(pre, fo, dlogits)
        if k == 0:
            acc, loss_acc = grads, loss
            continue
        b.phase = "accum"
        for p in b.params:
            acc[p.name] = b.add(f"acc{k}.{p.name}.grad", acc[p.name], grads[p.name])
        loss_acc = b.add(f"acc{k}.loss", loss_acc, loss)
    b.phase, b.micro = "update", -1
    n = cfg.tokens_per_step
    sched = b.op("schedule", b.tensor("sched", "i64", 0, SCHED_LEN),
                 [("lr", hyp.lr), ("min_lr", hyp.min_lr), ("warmup", hyp.warmup_steps), ("decay", hyp.decay_steps),
                  ("weight_decay", hyp.weight_decay), ("beta1", hyp.beta1), ("beta2", hyp.beta2)], step)
    b.final_grads = dict(acc)
    b.final_loss = loss_acc
    for p in b.params:
        dt, frac, shape = state_tensor_spec(p, "m")
        m2 = b.op("adam_m", b.tensor("next." + p.name + ".m", dt, frac, *shape),
                  [("tokens", n), ("c1", ONE30 - hyp.beta1)], state[p.name + ".m"], acc[p.name])
        dt, frac, shape = state_tensor_spec(p, "v")
        v2 = b.op("adam_v", b.tensor("next." + p.name + ".v", dt, frac, *shape),
                  [("tokens", n), ("c2", ONE30 - hyp.beta2)], state[p.name + ".v"], acc[p.name])
        dt, frac, shape = state_tensor_spec(p, "w")
        w2 = b.op("adam_w", b.tensor("next." + p.name + ".w", dt, frac, *shape), [("eps", hyp.eps)],
                  state[p.name + ".w"], m2, v2, sched)
        b.g.outputs += [w2, m2, v2]
    b.g.outputs.append(b.op("loss_mean", b.tensor("loss", "i64", FRAC_PROB, 1), [("tokens", n)], loss_acc))
    g = b.g.finish()
    g.final_grads = {p.name: acc[p.name] for p in b.params}
    g.final_loss = loss_acc
    return g


def forward_graph(cfg: Config, batch: int, seq: int) -> Graph:
    b = Builder(cfg)
    window = b.input("window", "u8", 0, batch, seq + 1)
    for p in b.params:
        dt, frac, shape = state_tensor_spec(p, "w")
        b.w[p.name] = b.input(p.name + ".w", dt, frac, *shape)
    b.prologue(False)
    b.phase, b.micro = "micro", 0
    fo = b.forward("", window, batch, seq)
    loss_tok = b.op("ce_loss", b.tensor("loss_tok", "i64", FRAC_PROB, batch * seq), [], fo["logits"], window)
    b.g.outputs = [fo["logits"], loss_tok]
    return b.g.finish()
