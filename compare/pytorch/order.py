"""order: the order-embedding model of Vendrov et al. as the LN/RMS Theano code trains it
(docs/papers.md#order-model), one training step as `normbench bench step order` times it:
batch 128 captions of 13 words plus the end token (14 steps), vocabulary 25,000, word
embeddings 300, a GRU of 1024 units whose final state is |h/||h|||, images 4096 -> 1024 by a
linear map, |c/||c|||, the order-violation loss summed over all pairs (margin 0.05), Adam lr 1e-3
(the OE code's "Kiros" bias correction changes only a scalar), each parameter tensor's gradient
clipped at norm 2.

The GRU cell is written as a per-step loop, with the norms where the code puts them
(docs/papers.md#order-norms): four per step, over x W + b (2H), x Wx + bx (H), h U (2H) and
h Ux (H), each with its own gain; LN adds a bias after each, RMS and pRMS have none (k = 128 of
2048 and 64 of 1024); batch is recurrent BatchNorm with statistics per time step; weight is
nn.utils.weight_norm on the four matrices. Beside the loop, `none` also runs PyTorch's fused
nn.GRU (its candidate applies r after h Ux + b: the same cost)."""
import torch
import torch.nn as nn
import torch.nn.functional as F

from norms import ROW_NORMS, StepBatchNorm, describe, has_shift, norm_info, row_norm

V, T, DW, H, DIMG, MARGIN = 25000, 14, 300, 1024, 4096, 0.05
EXTRAS = [("none", "fused", "fused nn.GRU, no norm")]


class NormGRU(nn.Module):
    def __init__(self, norm):
        super().__init__()
        self.norm = norm
        lin = [nn.Linear(DW, 2 * H), nn.Linear(DW, H), nn.Linear(H, 2 * H, bias=False),
               nn.Linear(H, H, bias=False)]
        if norm == "weight":
            lin = [nn.utils.weight_norm(m) for m in lin]
        self.xg, self.xc, self.hg, self.hc = lin
        widths = (2 * H, H, 2 * H, H)
        if norm in ROW_NORMS:
            self.n = nn.ModuleList(row_norm(norm, w, eps=1e-5, bias=has_shift(norm))
                                   for w in widths)
        elif norm == "batch":
            self.n = nn.ModuleList(StepBatchNorm(w, T, eps=1e-5) for w in widths)
        elif norm_info(norm)[0] not in ("nothing", "weights"):
            raise ValueError(f"no PyTorch form of order with '{norm}'")

    def forward(self, e):
        rows, bn = self.norm in ROW_NORMS, self.norm == "batch"
        xg, xc = self.xg(e), self.xc(e)  # all steps at once: (T, B, .)
        if rows:
            xg, xc = self.n[0](xg), self.n[1](xc)
        h = e.new_zeros(e.shape[1], H)
        for t in range(e.shape[0]):
            hg, hc, xgt, xct = self.hg(h), self.hc(h), xg[t], xc[t]
            if rows:
                hg, hc = self.n[2](hg), self.n[3](hc)
            elif bn:
                xgt, xct = self.n[0](xgt, t), self.n[1](xct, t)
                hg, hc = self.n[2](hg, t), self.n[3](hc, t)
            r, u = torch.sigmoid(xgt + hg).chunk(2, dim=-1)
            ht = torch.tanh(r * hc + xct)
            h = u * h + (1 - u) * ht
        return h


class Order(nn.Module):
    def __init__(self, norm, fused):
        super().__init__()
        self.emb = nn.Embedding(V, DW)
        self.gru = nn.GRU(DW, H) if fused else NormGRU(norm)
        self.fused = fused
        self.img = nn.Linear(DIMG, H)

    def forward(self, tok, img):
        e = self.emb(tok)
        h = self.gru(e)[0][-1] if self.fused else self.gru(e)
        s = F.normalize(h, dim=1).abs()
        c = F.normalize(self.img(img), dim=1).abs()
        E = (s.unsqueeze(1) - c.unsqueeze(0)).clamp(min=0).pow(2).sum(-1)  # E[i, j]: caption i, image j
        d = E.diagonal()
        off = 1 - torch.eye(E.shape[0])
        return ((MARGIN - E + d.unsqueeze(0)).clamp(min=0) * off).sum() + (
            (MARGIN - E + d.unsqueeze(1)).clamp(min=0) * off).sum()


def build(norm, variant, batch):
    if variant not in (None, "fused") or (variant == "fused" and norm != "none"):
        raise ValueError(f"no variant '{variant}' for order {norm}")
    model = Order(norm, variant == "fused")
    params = list(model.parameters())
    opt = torch.optim.Adam(params, lr=1e-3)
    tok = torch.randint(2, V, (T, batch))
    tok[-1] = 0
    img = torch.randn(batch, DIMG).clamp(min=0)

    def step():
        opt.zero_grad()
        model(tok, img).backward()
        for p in params:  # each tensor clipped at norm 2 (the OE code's maxnorm)
            nn.utils.clip_grad_norm_(p, 2.0)
        opt.step()

    what = "fused nn.GRU, no norm" if variant else {
        "batch": "recurrent BatchNorm (per-step statistics)", "weight": "nn.utils.weight_norm",
        "none": "GRU cell loop, no norm"}.get(norm) or f"{describe(norm)} x4 per step"
    return step, f"order embeddings, GRU 1024 over 14 steps, {what}, Adam"
