"""Config, its integer form (Hyper) and the parameter list, as in
pkg/exact/config.go and model.go."""
import hashlib
import json
import math
import struct
from dataclasses import dataclass, field

from .arith import ONE30, div_int, isqrt_int

VOCAB = 256
DEFAULTS = {"beta1": 0.9, "beta2": 0.95, "eps": 1e-8, "init_std": 0.02, "norm_eps": 1e-5}
Q_LR, Q_COEF, Q_NORM_EPS, FRAC_W = 40, 30, 32, 28
CONFIG_DOMAIN = b"depinchain/exact/config/v1"
HARD = dict(layers=256, d_model=4096, d_ff=1 << 16, context=4096, head_dim=1024,
            micro_tokens=1 << 20, tokens_per_step=1 << 22, micro_batches=1 << 15)


def fixed(x: float, f: int) -> int:
    """floor(x * 2^f + 1/2), exact in float64 for 0 <= x <= 1, f <= 40."""
    return int(math.floor(math.ldexp(float(x), f) + 0.5))


@dataclass
class Config:
    layers: int
    d_model: int
    heads: int
    d_ff: int
    context: int
    vocab: int
    batch: int
    micro_batch: int = 0
    optimizer: str = "adamw"
    lr: float = 0.0
    warmup_steps: int = 0
    decay_steps: int = 0
    min_lr: float = 0.0
    weight_decay: float = 0.0
    beta1: float = 0.0
    beta2: float = 0.0
    eps: float = 0.0
    init_std: float = 0.0
    norm_eps: float = 0.0

    @staticmethod
    def from_dict(d: dict) -> "Config":
        m, t = d["model"], d["train"]
        known_m = {"layers", "d_model", "heads", "d_ff", "context", "vocab"}
        known_t = {"batch", "micro_batch", "optimizer", "lr", "warmup_steps", "decay_steps", "min_lr",
                   "weight_decay", "beta1", "beta2", "eps", "init_std", "norm_eps"}
        for k in m:
            if k not in known_m:
                raise ValueError(f"model.{k}: unknown field")
        for k in t:
            if k not in known_t:
                raise ValueError(f"train.{k}: unknown field")
        c = Config(**{k: m[k] for k in known_m}, **{k: t[k] for k in t})
        return c.with_defaults()

    @staticmethod
    def from_json(s: str) -> "Config":
        return Config.from_dict(json.loads(s))

    def to_dict(self) -> dict:
        return {"model": {"layers": self.layers, "d_model": self.d_model, "heads": self.heads,
                          "d_ff": self.d_ff, "context": self.context, "vocab": self.vocab},
                "train": {"batch": self.batch, "micro_batch": self.micro_batch, "optimizer": self.optimizer,
                          "lr": self.lr, "warmup_steps": self.warmup_steps, "decay_steps": self.decay_steps,
                          "min_lr": self.min_lr, "weight_decay": self.weight_decay, "beta1": self.beta1,
                          "beta2": self.beta2, "eps": self.eps, "init_std": self.init_std,
                          "norm_eps": self.norm_eps}}

    def with_defaults(self) -> "Config":
        if not self.micro_batch:
            self.micro_batch = self.batch
        if not self.optimizer:
            self.optimizer = "adamw"
        for k, v in DEFAULTS.items():
            if not getattr(self, k):
                setattr(self, k, v)
        self.validate()
        return self

    def validate(self):
        errs = []

        def rng(name, v, lo, hi):
            if not (lo <= v <= hi):
                errs.append(f"{name}: must be in [{lo}, {hi}], got {v}")
        rng("model.layers", self.layers, 1, HARD["layers"])
        rng("model.d_model", self.d_model, 1, HARD["d_model"])
        rng("model.heads", self.heads, 1, HARD["d_model"])
        rng("model.d_ff", self.d_ff, 1, HARD["d_ff"])
        rng("model.context", self.context, 1, HARD["context"])
        if self.vocab != VOCAB:
            errs.append(f"model.vocab: must be {VOCAB} (byte-level tokens), got {self.vocab}")
        if self.heads >= 1 and self.d_model % self.heads:
            errs.append(f"model.d_model: must be divisible by model.heads ({self.d_model} vs {self.heads})")
        if self.batch < 1 or self.micro_batch < 1 or self.batch % self.micro_batch:
            errs.append(f"train.batch: must be divisible by train.micro_batch ({self.batch} vs {self.micro_batch})")
        if self.micro_batch * self.context > HARD["micro_tokens"]:
            errs.append("train.micro_batch: micro_batch*context too large")
        if self.batch * self.context > HARD["tokens_per_step"]:
            errs.append("train.batch: batch*context too large")
        if self.optimizer != "adamw":
            errs.append(f'train.optimizer: must be "adamw", got "{self.optimizer}"')
        if not (0 < self.lr <= 1):
            errs.append(f"train.lr: must be in (0, 1], got {self.lr}")
        if errs:
            raise ValueError("invalid config: " + "; ".join(errs))

    @property
    def head_dim(self) -> int:
        return self.d_model // self.heads

    @property
    def micro_batches(self) -> int:
        return self.batch // self.micro_batch

    @property
    def tokens_per_step(self) -> int:
        return self.batch * self.context

    def hyper(self) -> "Hyper":
        return Hyper(layers=self.layers, d_model=self.d_model, heads=self.heads, d_ff=self.d_ff,
                     context=self.context, vocab=self.vocab, batch=self.batch, micro_batch=self.micro_batch,
                     lr=fixed(self.lr, Q_LR), min_lr=fixed(self.min_lr, Q_LR),
                     warmup_steps=self.warmup_steps, decay_steps=self.decay_steps,
                     weight_decay=fixed(self.weight_decay, Q_COEF), beta1=fixed(self.beta1, Q_COEF),
                     beta2=fixed(self.beta2, Q_COEF), eps=fixed(self.eps, FRAC_W),
                     init_std=fixed(self.init_std, FRAC_W), norm_eps=fixed(self.norm_eps, Q_NORM_EPS))


HYPER_FIELDS = ["layers", "d_model", "heads", "d_ff", "context", "vocab", "batch", "micro_batch",
                "lr", "min_lr", "warmup_steps", "decay_steps", "weight_decay", "beta1", "beta2",
                "eps", "init_std", "norm_eps"]
CONFIG_ENCODED_SIZE = 8 * (len(HYPER_FIELDS) + 2)


@dataclass(frozen=True)
class Hyper:
    layers: int
    d_model: int
    heads: int
    d_ff: int
    context: int
    vocab: int
    batch: int
    micro_batch: int
    lr: int
    min_lr: int
    warmup_steps: int
    decay_steps: int
    weight_decay: int
    beta1: int
    beta2: int
    eps: int
    init_std: int
    norm_eps: int

    def encode(self) -> bytes:
        vals = [getattr(self, f) for f in HYPER_FIELDS] + [0, 0]
        return struct.pack("<%dq" % len(vals), *vals)

    def digest(self) -> bytes:
        return hashlib.sha256(CONFIG_DOMAIN + self.encode()).digest()

    @staticmethod
    def decode(b: bytes) -> "Hyper":
        vals = struct.unpack("<%dq" % (len(HYPER_FIELDS) + 2), b)
        if vals[-1] or vals[-2]:
            raise ValueError("reserved config words are not zero")
        return Hyper(**dict(zip(HYPER_FIELDS, vals)))

    def config(self) -> Config:
        c = Config(layers=self.layers, d_model=self.d_model, heads=self.heads, d_ff=self.d_ff,
                   context=self.context, vocab=self.vocab, batch=self.batch, micro_batch=self.micro_batch,
                   lr=math.ldexp(self.lr, -Q_LR), min_lr=math.ldexp(self.min_lr, -Q_LR),
                   warmup_steps=self.warmup_steps, decay_steps=self.decay_steps,
                   weight_decay=math.ldexp(self.weight_decay, -Q_COEF), beta1=math.ldexp(self.beta1, -Q_COEF),
                   beta2=math.ldexp(self.beta2, -Q_COEF), eps=math.ldexp(self.eps, -FRAC_W),
                   init_std=math.ldexp(self.init_std, -FRAC_W), norm_eps=math.ldexp(self.norm_eps, -Q_NORM_EPS))
        c.with_defaults()
        if c.hyper() != self:
            raise ValueError("config encoding is not canonical")
        return c


@dataclass
class ParamSpec:
    name: str
    rows: int
    cols: int
    linear: bool = False
    residual: bool = False


def params(c: Config):
    d, f, v = c.d_model, c.d_ff, c.vocab
    ps = [ParamSpec("tok_emb", v, d), ParamSpec("pos_emb", c.context, d)]
    for i in range(c.layers):
        l = f"l{i}."
        ps += [ParamSpec(l + "attn_qkv", 3 * d, d, True), ParamSpec(l + "attn_out", d, d, True, True),
               ParamSpec(l + "mlp_in", f, d, True), ParamSpec(l + "mlp_out", d, f, True, True)]
    ps.append(ParamSpec("head", v, d, True))
    return ps


def attn_scale(head_dim: int) -> int:
    return div_int(1 << 45, isqrt_int(head_dim << 30))


def init_radius(h: Hyper, p: ParamSpec) -> int:
    v = 3 * h.init_std * h.init_std
    if p.residual:
        v = div_int(v, 2 * h.layers)
    return isqrt_int(v)
