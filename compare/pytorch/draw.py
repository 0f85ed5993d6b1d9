"""draw: DRAW (Gregor et al. 2015) as normbench's task draw builds it (nn/draw.h,
docs/papers.md#draw), one training step as `normbench bench step draw` times it: 28x28 binary
images, encoder and decoder LSTMs of --dim units (256), --glimpses steps (64), latent --z-dim
(100) per step, the 2x2 attention read and 5x5 write (--read-n, --write-n) or --no-attention, the
Bernoulli reconstruction of the final canvas plus each step's KL, Adam lr 1e-3 with the global
gradient norm clipped at 10.

The LSTM cell is a per-step loop with the norms where nn/lstm.c puts them (as compare/pytorch/
reader.py): one norm over the 4H input term [r, h_dec] W + b, one over h U, added, then the bias
again (with every norm, none and weight too, as nn/lstm.c: the step's pre-activation is
x W + b + h U + b there), and a norm of the cell on the output path only, h = sigmoid(o) tanh(N(c)); learned
initial states. The filterbanks follow nn/draw.h's formulas (pixel centres 1..A, stride
(max(A, B) - 1) / (N - 1) exp(log d), filters normalized over their row plus 1e-8).

Run with torch 2.11 (CPU) by its driver alone: every norm but batch opens and steps (batch
refused, as normbench refuses it), --no-attention too; the initial loss at the paper's sizes is
543.5 nats with none and 571.3 with layer (normbench: 544.4 and 572.5 on other data and draws).
Beside normbench (`bench step draw --against pytorch`, Debian's torch 1.13): docs/results/draw.md.
The model is normbench's: tests/ref/ref_draw.py runs it in float64 with given parameters, and
tests/test_draw.c matches normbench's loss and gradients to it (tests/cli/78-draw-torch.t checks
that this file still gives the committed numbers)."""
import torch
import torch.nn as nn
import torch.nn.functional as F

from norms import ROW_NORMS, describe, has_shift, norm_info, row_norm

SIDE = 28
PRESETS = {"paper": (256, 64, 100), "small": (64, 16, 16)}
CFG = {"preset": "paper", "dim": 0, "glimpses": 0, "z-dim": 0, "model": "attention",
       "read-n": 2, "write-n": 5}
NO_EFFECT = ("binarize", "eval-every")
EXTRAS = []


def configure(opts):
    for name, value in opts.items():
        if name in NO_EFFECT:
            continue
        if name == "no-attention" and value is None:
            CFG["model"] = "no-attention"
            continue
        if name not in CFG or value is None:
            raise ValueError(f"--{name} has no PyTorch form in compare/pytorch/draw.py")
        CFG[name] = value if name in ("preset", "model") else int(value)
    if CFG["preset"] not in PRESETS:
        raise ValueError(f"no PyTorch form of --preset {CFG['preset']}")
    if CFG["model"] not in ("attention", "no-attention"):
        raise ValueError(f"no PyTorch form of --model {CFG['model']}")


def sizes():
    H, T, Z = PRESETS[CFG["preset"]]
    return (CFG["dim"] or H, CFG["glimpses"] or T, CFG["z-dim"] or Z)


class NormLSTMCell(nn.Module):
    def __init__(self, norm, C, H):
        super().__init__()
        self.norm, self.H = norm, H
        self.W = nn.Linear(C, 4 * H)
        self.U = nn.Linear(H, 4 * H, bias=False)
        if norm == "weight":
            self.W, self.U = nn.utils.weight_norm(self.W), nn.utils.weight_norm(self.U)
        self.h0 = nn.Parameter(torch.zeros(H))
        if norm in ROW_NORMS:
            b = has_shift(norm)
            self.n = nn.ModuleList([row_norm(norm, 4 * H, bias=b), row_norm(norm, 4 * H, bias=b),
                                    row_norm(norm, H, bias=b)])
        elif norm_info(norm)[0] not in ("nothing", "weights"):
            raise ValueError(f"no PyTorch form of draw with '{norm}' (normbench refuses batch too)")

    def initial(self, B, like):
        return self.h0.expand(B, self.H), like.new_zeros(B, self.H)

    def forward(self, x, h, c):
        rows = self.norm in ROW_NORMS
        xt, hu = self.W(x), self.U(h)
        if rows:
            xt, hu = self.n[0](xt), self.n[1](hu)
        pre = xt + hu + self.W.bias  # the bias again, as nn/lstm.c adds it at the step
        i, f, o, g = pre.chunk(4, dim=-1)
        c = torch.sigmoid(f) * c + torch.sigmoid(i) * torch.tanh(g)
        h = torch.sigmoid(o) * torch.tanh(self.n[2](c) if rows else c)
        return h, c


def filterbank(p, N):
    """FX, FY (B, N, SIDE) and gamma (B, 1, 1) from p (B, 5), nn/draw.h's formulas."""
    gx = (SIDE + 1) / 2 * (p[:, 0] + 1)
    gy = (SIDE + 1) / 2 * (p[:, 1] + 1)
    s2, delta = torch.exp(p[:, 2]), (SIDE - 1) / (N - 1) * torch.exp(p[:, 3])
    offs = torch.arange(N, dtype=p.dtype) - N / 2 + 0.5
    pix = torch.arange(1, SIDE + 1, dtype=p.dtype)

    def bank(g):
        mu = g[:, None] + offs[None, :] * delta[:, None]  # (B, N)
        e = torch.exp(-(pix[None, None, :] - mu[:, :, None]) ** 2 / (2 * s2[:, None, None]))
        return e / (e.sum(2, keepdim=True) + 1e-8)

    return bank(gx), bank(gy), torch.exp(p[:, 4])[:, None, None]


class Draw(nn.Module):
    def __init__(self, norm):
        super().__init__()
        H, T, Z = sizes()
        self.T, self.Z, self.attn = T, Z, CFG["model"] == "attention"
        self.Nr, self.Nw = CFG["read-n"], CFG["write-n"]
        D = SIDE * SIDE
        R = 2 * self.Nr ** 2 if self.attn else 2 * D
        self.enc, self.dec = NormLSTMCell(norm, R + H, H), NormLSTMCell(norm, Z, H)
        self.mu, self.ls = nn.Linear(H, Z), nn.Linear(H, Z)
        self.write = nn.Linear(H, self.Nw ** 2 if self.attn else D)
        if self.attn:
            self.read_p, self.write_p = nn.Linear(H, 5), nn.Linear(H, 5)
        for m in (self.mu, self.ls, self.write) + ((self.read_p, self.write_p) if self.attn else ()):
            nn.init.normal_(m.weight, 0, 0.01)  # nn/draw.h: DRAW's code's draw
            nn.init.zeros_(m.bias)

    def forward(self, x, eps):  # x (B, 784) in {0, 1}, eps (T, B, Z)
        B = x.shape[0]
        img = x.view(B, SIDE, SIDE)
        c = x.new_zeros(B, SIDE, SIDE)
        he, ce = self.enc.initial(B, x)
        hd, cd = self.dec.initial(B, x)
        kl = 0
        for t in range(self.T):
            xh = img - torch.sigmoid(c)
            if self.attn:
                FX, FY, g = filterbank(self.read_p(hd), self.Nr)
                r = torch.cat([(g * FY @ img @ FX.transpose(1, 2)).flatten(1),
                               (g * FY @ xh @ FX.transpose(1, 2)).flatten(1)], 1)
            else:
                r = torch.cat([x, xh.flatten(1)], 1)
            he, ce = self.enc(torch.cat([r, hd], 1), he, ce)
            mu, ls = self.mu(he), self.ls(he)
            z = mu + torch.exp(ls) * eps[t]
            kl = kl + 0.5 * (mu ** 2 + torch.exp(2 * ls) - 2 * ls - 1).sum()
            hd, cd = self.dec(z, hd, cd)
            w = self.write(hd)
            if self.attn:
                FX, FY, g = filterbank(self.write_p(hd), self.Nw)
                w = w.view(B, self.Nw, self.Nw)
                c = c + FY.transpose(1, 2) @ w @ FX / g
            else:
                c = c + w.view(B, SIDE, SIDE)
        rec = F.binary_cross_entropy_with_logits(c.flatten(1), x, reduction="sum")
        self.rec, self.kl = rec.detach(), kl.detach()  # the bound's parts, summed over images
        return (rec + kl) / B


def build(norm, variant, batch):
    if variant is not None:
        raise ValueError(f"no variant '{variant}' for draw {norm}")
    model = Draw(norm)
    model.train()
    params = list(model.parameters())
    opt = torch.optim.Adam(params, lr=1e-3)
    x = (torch.rand(batch, SIDE * SIDE) < 0.2).float()

    def step():
        opt.zero_grad()
        eps = torch.randn(model.T, batch, model.Z)
        model(x, eps).backward()
        nn.utils.clip_grad_norm_(params, 10.0)
        opt.step()

    H, T, Z = sizes()
    what = {"weight": "nn.utils.weight_norm", "none": "LSTM cell loop, no norm"}.get(
        norm) or f"{describe(norm)} in the LSTM cells"
    attn = f"read {model.Nr}, write {model.Nw}" if model.attn else "no attention"
    return step, f"DRAW {H} units, {T} glimpses, z {Z}, {attn}, {what}, Adam, clip 10"
