#!/usr/bin/env python3
"""A plain floating-point PyTorch model of the exact transformer's
architecture: token + position embeddings, pre-norm blocks (RMSNorm without
gain, causal multi-head attention without biases, a ReLU MLP without
biases), a final RMSNorm and an untied output head.

It loads a state exported as model.safetensors + config.json (see
pkg/exact Export), reproduces the exact model's next-token predictions to
within rounding, and is the float32 baseline of the benchmarks.

  float_model.py predict DIR "prompt"    print the next-token argmax per position
  float_model.py check DIR EXPECTED.json compare with the exact model's logits
"""
import json
import math
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import torch  # noqa: E402
import torch.nn as nn  # noqa: E402
import torch.nn.functional as F  # noqa: E402


def rmsnorm(x, eps):
    return x * torch.rsqrt(x.pow(2).mean(dim=-1, keepdim=True) + eps)


class FloatGPT(nn.Module):
    def __init__(self, layers, d_model, heads, d_ff, context, vocab=256, norm_eps=1e-5, dtype=torch.float32):
        super().__init__()
        self.layers, self.d_model, self.heads, self.d_ff, self.context, self.vocab = layers, d_model, heads, d_ff, context, vocab
        self.norm_eps = norm_eps
        P = lambda *s: nn.Parameter(torch.zeros(*s, dtype=dtype))  # noqa: E731
        self.tok_emb, self.pos_emb = P(vocab, d_model), P(context, d_model)
        self.attn_qkv = nn.ParameterList([P(3 * d_model, d_model) for _ in range(layers)])
        self.attn_out = nn.ParameterList([P(d_model, d_model) for _ in range(layers)])
        self.mlp_in = nn.ParameterList([P(d_ff, d_model) for _ in range(layers)])
        self.mlp_out = nn.ParameterList([P(d_model, d_ff) for _ in range(layers)])
        self.head = P(vocab, d_model)

    @staticmethod
    def from_config(cfg: dict, dtype=torch.float32):
        return FloatGPT(cfg["n_layer"], cfg["n_embd"], cfg["n_head"], cfg["n_inner"], cfg["n_positions"],
                        cfg["vocab_size"], cfg["rms_norm_eps"], dtype)

    def named_weights(self):
        """(exact-state parameter name, tensor) in the canonical order."""
        out = [("tok_emb", self.tok_emb), ("pos_emb", self.pos_emb)]
        for i in range(self.layers):
            out += [(f"l{i}.attn_qkv", self.attn_qkv[i]), (f"l{i}.attn_out", self.attn_out[i]),
                    (f"l{i}.mlp_in", self.mlp_in[i]), (f"l{i}.mlp_out", self.mlp_out[i])]
        return out + [("head", self.head)]

    def load_weights(self, weights: dict):
        with torch.no_grad():
            for name, p in self.named_weights():
                p.copy_(weights[name].to(p.dtype))

    def forward(self, ids):
        """ids [B, T] int64 → logits [B, T, vocab]."""
        B, T = ids.shape
        D, H = self.d_model, self.heads
        dh = D // H
        x = self.tok_emb[ids] + self.pos_emb[:T]
        mask = torch.ones(T, T, dtype=torch.bool, device=ids.device).tril()
        for i in range(self.layers):
            h = rmsnorm(x, self.norm_eps)
            qkv = h @ self.attn_qkv[i].t()
            q, k, v = qkv.view(B, T, 3, H, dh).permute(2, 0, 3, 1, 4)
            s = (q @ k.transpose(-1, -2)) / math.sqrt(dh)
            s = s.masked_fill(~mask, float("-inf"))
            o = torch.softmax(s, dim=-1) @ v
            x = x + o.permute(0, 2, 1, 3).reshape(B, T, D) @ self.attn_out[i].t()
            h2 = rmsnorm(x, self.norm_eps)
            x = x + F.relu(h2 @ self.mlp_in[i].t()) @ self.mlp_out[i].t()
        return rmsnorm(x, self.norm_eps) @ self.head.t()

    def loss(self, windows):
        """Mean next-token cross-entropy (nats) over windows [B, T+1]."""
        logits = self.forward(windows[:, :-1])
        return F.cross_entropy(logits.reshape(-1, self.vocab).float(), windows[:, 1:].reshape(-1))


def load_pretrained(d, dtype=torch.float32):
    from depin_exact.safetensors_io import read_safetensors
    with open(os.path.join(d, "config.json")) as f:
        cfg = json.load(f)
    m = FloatGPT.from_config(cfg, dtype)
    m.load_weights(read_safetensors(os.path.join(d, "model.safetensors")))
    return m


def check(d, expected_path):
    """Compares the float32 model in d with the exact model's predictions
    in expected_path ({"windows": [[bytes]], "argmax": [...], "logits":
    [[...]]}, logits in nats) and prints agreement statistics."""
    with open(expected_path) as f:
        exp = json.load(f)
    m = load_pretrained(d)
    ids = torch.tensor(exp["windows"], dtype=torch.int64)
    with torch.no_grad():
        logits = m(ids).reshape(-1, m.vocab)
    want = torch.tensor(exp["logits"], dtype=torch.float64).reshape(-1, m.vocab)
    argmax_want = torch.tensor(exp["argmax"])
    agree = (logits.argmax(-1) == argmax_want).double().mean().item()
    diff = (logits.double() - want).abs()
    print(json.dumps({"argmax_agreement": agree, "max_abs_logit_diff": diff.max().item(),
                      "mean_abs_logit_diff": diff.mean().item(), "logit_range": (want.max() - want.min()).item(),
                      "positions": int(argmax_want.numel())}))
    return 0


def main(argv):
    if len(argv) == 3 and argv[0] == "check":
        return check(argv[1], argv[2])
    if len(argv) == 3 and argv[0] == "predict":
        m = load_pretrained(argv[1])
        ids = torch.tensor([list(argv[2].encode())], dtype=torch.int64)
        with torch.no_grad():
            print(json.dumps(m(ids)[0].argmax(-1).tolist()))
        return 0
    print(__doc__, file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
