"""lm: one training step of `normbench bench step lm` (tasks/lm.c's lm_bench_open) in PyTorch:
nanoGPT's GPT (model.py) written with PyTorch ops at the same shapes, on a fixed generated batch
of B windows of --context characters over Tiny Shakespeare's 65.

The model (nn/gpt.h): x = wte[tok] + wpe[t], dropout; per block, pre-norm (GPT-2, nanoGPT)
x += drop(attn(N1(x))); x += drop(mlp(N2(x))), or post-norm x = N1(x + drop(attn(x))) ...;
attention with one nn.Linear(d, 3d) for q, k, v, causal softmax(q kᵀ / sqrt(dh)) per head
(PyTorch's F.scaled_dot_product_attention where the installed torch has it, as nanoGPT's flash
path; else the explicit masked softmax of nanoGPT's slow path), dropout on the weights, an output
nn.Linear(d, d); the MLP nn.Linear(d, 4d), GELU in its tanh form, nn.Linear(4d, d); pre-norm: a
final norm; logits = h wteᵀ (tied); mean cross-entropy. Norms: layer nn.LayerNorm (its shift
with --bias on, as nanoGPT's LayerNorm(bias)); rms the composite RMSNorm of norms.py (gain only),
and PyTorch's own nn.RMSNorm as an extra row where the installed torch has one; prms the
composite pRMSNorm; dyt norms.py's DyT (its shift with --bias on); none nn.Identity; weight: no
activation norm, every block's map reparameterized by torch.nn.utils.weight_norm (per output
row). AdamW (β 0.9, 0.99, eps 1e-8, lr 1e-3) with weight decay 0.1 on the matrices (dim >= 2:
maps and embeddings) and none on biases and gains, the global gradient norm clipped at 1 — nanoGPT's configure_optimizers and
train.py. nanoGPT's initialization (N(0, 0.02²), the residual projections 0.02/sqrt(2 layers)).

GPT and its optimizer are shared with compare/pytorch/lm_train.py (time to quality)."""
import math

import torch
import torch.nn as nn
import torch.nn.functional as F

from norms import ROW_NORMS, describe, has_shift, norm_info, row_norm

VOCAB = 65  # Tiny Shakespeare's characters: tasks/lm.c's bench
PRESETS = {"cpu": (4, 4, 128, 64, 0.0), "gpu": (6, 6, 384, 256, 0.2)}  # layers heads d ctx drop
# options of `lm` that do not change normbench's benchmark step (the schedule, evaluation)
NO_EFFECT = {"warmup", "min-lr", "eval-every", "eval-windows"}
CFG = {"preset": "cpu", "norm-position": "pre", "bias": "on", "layers": 0, "heads": 0, "dim": 0,
       "context": 0, "dropout": -1.0, "weight-decay": 0.1}
HAS_SDPA = hasattr(F, "scaled_dot_product_attention")
HAS_RMSNORM = hasattr(nn, "RMSNorm")
EXTRAS = [("rms", "torch", "PyTorch's own nn.RMSNorm")] if HAS_RMSNORM else []


def configure(opts):
    for name, value in opts.items():
        if name in NO_EFFECT:
            continue
        if name not in CFG or value is None:
            raise ValueError(f"--{name} has no PyTorch form in compare/pytorch/lm.py")
        if name in ("layers", "heads", "dim", "context"):
            CFG[name] = int(value)
        elif name in ("dropout", "weight-decay"):
            CFG[name] = float(value)
        else:
            CFG[name] = value
    if CFG["preset"] not in PRESETS:
        raise ValueError(f"no PyTorch form of --preset {CFG['preset']}")
    if CFG["norm-position"] not in ("pre", "post"):
        raise ValueError(f"no PyTorch form of --norm-position {CFG['norm-position']}")
    if CFG["bias"] not in ("on", "off"):
        raise ValueError(f"no PyTorch form of --bias {CFG['bias']}")


def shapes(cfg=None):
    """(layers, heads, d, ctx, dropout) in force: the preset's, where an option does not say."""
    c = cfg or CFG
    L, H, d, T, p = PRESETS[c["preset"]]
    return (c["layers"] or L, c["heads"] or H, c["dim"] or d, c["context"] or T,
            p if c["dropout"] < 0 else c["dropout"])


def make_norm(kind, d, bias, variant=None):
    if kind in ("none", "weight"):
        return nn.Identity()
    if kind == "layer":
        return nn.LayerNorm(d, eps=1e-5, elementwise_affine=True) if bias else \
            _LayerNormGain(d)
    if kind == "rms" and variant == "torch":
        return nn.RMSNorm(d, eps=1e-5)
    if kind in ROW_NORMS:  # a gain, and a bias where the norm has one and --bias is on (dyt)
        return row_norm(kind, d, eps=1e-5, bias=bias and has_shift(kind))
    raise ValueError(f"no PyTorch form of lm with '{kind}'")


class _LayerNormGain(nn.Module):
    """nanoGPT's LayerNorm with bias=False: a gain only."""

    def __init__(self, d):
        super().__init__()
        self.d = d
        self.weight = nn.Parameter(torch.ones(d))

    def forward(self, x):
        return F.layer_norm(x, (self.d,), self.weight, None, 1e-5)


class Attention(nn.Module):
    def __init__(self, d, heads, ctx, p, bias):
        super().__init__()
        self.h, self.p = heads, p
        self.qkv = nn.Linear(d, 3 * d, bias=bias)
        self.proj = nn.Linear(d, d, bias=bias)
        self.drop_w, self.drop_r = nn.Dropout(p), nn.Dropout(p)
        if not HAS_SDPA:
            self.register_buffer("mask", torch.tril(torch.ones(ctx, ctx, dtype=torch.bool)))

    def forward(self, x):
        B, T, d = x.shape
        q, k, v = self.qkv(x).split(d, dim=2)
        q, k, v = (t.view(B, T, self.h, d // self.h).transpose(1, 2) for t in (q, k, v))
        if HAS_SDPA:
            y = F.scaled_dot_product_attention(q, k, v, dropout_p=self.p if self.training else 0,
                                               is_causal=True)
        else:
            a = (q @ k.transpose(-2, -1)) * (1.0 / math.sqrt(k.shape[-1]))
            a = a.masked_fill(~self.mask[:T, :T], float("-inf"))
            y = self.drop_w(F.softmax(a, dim=-1)) @ v
        return self.drop_r(self.proj(y.transpose(1, 2).contiguous().view(B, T, d)))


class Block(nn.Module):
    def __init__(self, d, heads, ctx, p, bias, norm, pre, variant):
        super().__init__()
        self.pre = pre
        self.n1, self.n2 = make_norm(norm, d, bias, variant), make_norm(norm, d, bias, variant)
        self.attn = Attention(d, heads, ctx, p, bias)
        self.fc, self.fc_proj = nn.Linear(d, 4 * d, bias=bias), nn.Linear(4 * d, d, bias=bias)
        self.drop = nn.Dropout(p)
        if norm == "weight":
            for name in ("fc", "fc_proj"):
                setattr(self, name, nn.utils.weight_norm(getattr(self, name), dim=0))
            for name in ("qkv", "proj"):
                setattr(self.attn, name, nn.utils.weight_norm(getattr(self.attn, name), dim=0))

    def mlp(self, x):
        return self.drop(self.fc_proj(F.gelu(self.fc(x), approximate="tanh")))

    def forward(self, x):
        if self.pre:
            x = x + self.attn(self.n1(x))
            return x + self.mlp(self.n2(x))
        x = self.n1(x + self.attn(x))
        return self.n2(x + self.mlp(x))


class GPT(nn.Module):
    def __init__(self, norm, vocab, layers, heads, d, ctx, p, bias=True, pre=True, variant=None):
        super().__init__()
        if norm not in ("none", "weight") + ROW_NORMS:
            norm_info(norm)  # an unknown name: says which norms there are
            raise ValueError(f"no PyTorch form of lm with '{norm}'")
        self.wte, self.wpe = nn.Embedding(vocab, d), nn.Embedding(ctx, d)
        self.drop = nn.Dropout(p)
        self.blocks = nn.ModuleList(
            [Block(d, heads, ctx, p, bias, norm, pre, variant) for _ in range(layers)])
        self.fin = make_norm(norm, d, bias, variant) if pre else nn.Identity()
        self.apply(self._init)
        for b in self.blocks:  # the maps that end a residual branch
            for lin in (b.attn.proj, b.fc_proj):
                w = lin.weight_v if norm == "weight" else lin.weight
                nn.init.normal_(w, 0.0, 0.02 / math.sqrt(2 * layers))
        if norm == "weight":  # g: the rows' norms, so that W starts as v
            for m in self.modules():
                if hasattr(m, "weight_g"):
                    with torch.no_grad():
                        m.weight_g.copy_(m.weight_v.norm(dim=1, keepdim=True))

    @staticmethod
    def _init(m):
        if isinstance(m, (nn.Linear, nn.Embedding)):
            w = getattr(m, "weight_v", None)
            nn.init.normal_(w if w is not None else m.weight, 0.0, 0.02)
            if isinstance(m, nn.Linear) and m.bias is not None:
                nn.init.zeros_(m.bias)

    def forward(self, tok, tgt=None):
        T = tok.shape[1]
        x = self.drop(self.wte(tok) + self.wpe(torch.arange(T, device=tok.device)))
        for b in self.blocks:
            x = b(x)
        logits = self.fin(x) @ self.wte.weight.t()  # tied output projection
        if tgt is None:
            return logits
        return F.cross_entropy(logits.reshape(-1, logits.shape[-1]), tgt.reshape(-1))


def adamw(model, lr=1e-3, weight_decay=0.1):
    """nanoGPT's configure_optimizers: decay on the matrices (dim >= 2), none on the rest."""
    ps = [p for p in model.parameters() if p.requires_grad]
    groups = [{"params": [p for p in ps if p.dim() >= 2], "weight_decay": weight_decay},
              {"params": [p for p in ps if p.dim() < 2], "weight_decay": 0.0}]
    return torch.optim.AdamW(groups, lr=lr, betas=(0.9, 0.99), eps=1e-8)


def build(norm, variant, batch):
    if variant not in (None, "torch") or (variant == "torch" and norm != "rms"):
        raise ValueError(f"no variant '{variant}' of '{norm}' for lm")
    torch.set_flush_denormal(True)  # as normbench's lm (flush_denormals)
    L, H, d, T, p = shapes()
    if d % H:
        raise ValueError(f"the width {d} is not a multiple of the {H} heads")
    pre = CFG["norm-position"] == "pre"
    model = GPT(norm, VOCAB, L, H, d, T, p, bias=CFG["bias"] == "on", pre=pre, variant=variant)
    model.train()
    opt = adamw(model, weight_decay=CFG["weight-decay"])
    data = torch.randint(0, VOCAB, (batch, T + 1))
    tok, tgt = data[:, :-1].contiguous(), data[:, 1:].contiguous()
    params = list(model.parameters())

    def step():
        opt.zero_grad(set_to_none=True)
        model(tok, tgt).backward()
        nn.utils.clip_grad_norm_(params, 1.0)
        opt.step()

    what = {"none": "nn.Identity for the norms",
            "weight": "weight_norm on the block maps"}.get(norm) or describe(norm)
    if variant == "torch":
        what = "nn.RMSNorm"
    attn = "F.scaled_dot_product_attention" if HAS_SDPA else "masked softmax attention"
    return step, (f"nanoGPT GPT {L} layers {H} heads d {d}, {CFG['norm-position']}-norm, "
                  f"{batch}x{T} chars, {what}, {attn}, GELU tanh, AdamW")
