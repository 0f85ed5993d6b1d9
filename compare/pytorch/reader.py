"""reader: the attentive reader as Cooijmans' code builds it (docs/papers.md#reader-model), one
training step as `normbench bench step reader` times it: batch 64, passages of 100 and
questions of 20 tokens, vocabulary 50,000 (embedding and output), d = 240, bidirectional LSTM
encoders for passage and question, dropout 0.5 on the embeddings and the output layer, the
bilinear attention, the output over the whole vocabulary, the AR code's Adam lr 8e-5
(torch.optim.Adam: the same cost) with the global gradient norm clipped at 10.

The LSTM cell is a per-step loop with the norms where the code puts them
(docs/papers.md#reader-norms): one joint norm over the 4d input term x W + b, one over h U,
added, then the bias again, and a norm of the cell on the output path only,
h = sigmoid(o) tanh(N(c)); LN with gains and biases, RMS and pRMS gains only (k = 60 of 960,
15 of 240), batch with statistics per time step and gains starting at 0.1, weight
nn.utils.weight_norm on W and U. Beside the loop, `none` also runs PyTorch's fused
nn.LSTM (bidirectional; it adds two biases too)."""
import torch
import torch.nn as nn
import torch.nn.functional as F

from norms import ROW_NORMS, StepBatchNorm, describe, has_shift, norm_info, row_norm

V, TD, TQ, D = 50000, 100, 20, 240
X = 2 * D
EXTRAS = [("none", "fused", "fused nn.LSTM, no norm")]


class NormLSTM(nn.Module):
    def __init__(self, norm, steps):
        super().__init__()
        self.norm = norm
        self.W = nn.Linear(D, 4 * D)
        self.U = nn.Linear(D, 4 * D, bias=False)
        if norm == "weight":
            self.W, self.U = nn.utils.weight_norm(self.W), nn.utils.weight_norm(self.U)
        self.h0 = nn.Parameter(torch.zeros(D))
        if norm in ROW_NORMS:
            b = has_shift(norm)
            self.n = nn.ModuleList([row_norm(norm, 4 * D, bias=b), row_norm(norm, 4 * D, bias=b),
                                    row_norm(norm, D, bias=b)])
        elif norm == "batch":
            self.n = nn.ModuleList([StepBatchNorm(4 * D, steps, gain=0.1, bias=False),
                                    StepBatchNorm(4 * D, steps, gain=0.1, bias=False),
                                    StepBatchNorm(D, steps, gain=0.1)])
        elif norm_info(norm)[0] not in ("nothing", "weights"):
            raise ValueError(f"no PyTorch form of reader with '{norm}'")

    def forward(self, e):  # e: (T, B, D) -> states (T, B, D)
        rows, bn = self.norm in ROW_NORMS, self.norm == "batch"
        xw = self.W(e)
        if rows:
            xw = self.n[0](xw)
        h = self.h0.expand(e.shape[1], D)
        c = e.new_zeros(e.shape[1], D)
        out = []
        for t in range(e.shape[0]):
            hu, xt = self.U(h), xw[t]
            if rows:
                hu = self.n[1](hu)
            elif bn:
                xt, hu = self.n[0](xt, t), self.n[1](hu, t)
            pre = xt + hu + self.W.bias if self.norm != "none" else xt + hu
            i, f, o, g = pre.chunk(4, dim=-1)
            c = torch.sigmoid(f) * c + torch.sigmoid(i) * torch.tanh(g)
            cn = self.n[2](c) if rows else (self.n[2](c, t) if bn else c)
            h = torch.sigmoid(o) * torch.tanh(cn)
            out.append(h)
        return torch.stack(out)


class BiEncoder(nn.Module):
    def __init__(self, norm, steps, fused):
        super().__init__()
        self.fused = fused
        if fused:
            self.lstm = nn.LSTM(D, D, bidirectional=True)
            self.h0 = nn.Parameter(torch.zeros(2, 1, D))
        else:
            self.f, self.b = NormLSTM(norm, steps), NormLSTM(norm, steps)

    def forward(self, e):  # (T, B, D) -> states (T, B, 2D), final (B, 2D)
        if self.fused:
            h0 = self.h0.expand(2, e.shape[1], D).contiguous()
            P, _ = self.lstm(e, (h0, torch.zeros_like(h0)))
            return P, torch.cat([P[-1, :, :D], P[0, :, D:]], dim=1)
        hf, hb = self.f(e), self.b(e.flip(0)).flip(0)
        return torch.cat([hf, hb], dim=2), torch.cat([hf[-1], hb[0]], dim=1)


class Reader(nn.Module):
    def __init__(self, norm, fused):
        super().__init__()
        self.emb = nn.Embedding(V, D)
        self.encd, self.encq = BiEncoder(norm, TD, fused), BiEncoder(norm, TQ, fused)
        self.Bm = nn.Parameter(torch.randn(X, X) * 0.05)
        self.ac, self.aq = nn.Linear(X, D), nn.Linear(X, D, bias=False)
        self.att = nn.Linear(D, 1, bias=False)
        self.oc, self.oq, self.om = nn.Linear(X, D, bias=False), nn.Linear(X, D), nn.Linear(X, D, bias=False)
        self.logit = nn.Linear(D, V)

    def forward(self, tokd, tokq, y):
        ed = F.dropout(self.emb(tokd), 0.5, self.training)
        eq = F.dropout(self.emb(tokq), 0.5, self.training)
        P, _ = self.encd(ed)  # (TD, B, X)
        _, q = self.encq(eq)
        P = P.transpose(0, 1)  # (B, TD, X)
        v = (q @ self.Bm) @ self.Bm.t()
        sim = torch.einsum("btx,bx->bt", P, v)
        M = torch.tanh(self.ac(P) + self.aq(q).unsqueeze(1) + sim.unsqueeze(2))
        a = torch.softmax(self.att(M).squeeze(2), dim=1)
        r = torch.einsum("bt,btx->bx", a, P)
        g = torch.tanh(self.oc(r) + self.oq(q) + self.om(P.mean(1)))
        g = F.dropout(g, 0.5, self.training)
        return F.cross_entropy(self.logit(g), y)


def build(norm, variant, batch):
    if variant not in (None, "fused") or (variant == "fused" and norm != "none"):
        raise ValueError(f"no variant '{variant}' for reader {norm}")
    model = Reader(norm, variant == "fused")
    model.train()
    params = list(model.parameters())
    opt = torch.optim.Adam(params, lr=8e-5)
    tokd = torch.randint(0, V, (TD, batch))
    tokq = torch.randint(0, V, (TQ, batch))
    y = torch.randint(0, V, (batch,))

    def step():
        opt.zero_grad()
        model(tokd, tokq, y).backward()
        nn.utils.clip_grad_norm_(params, 10.0)
        opt.step()

    what = "fused nn.LSTM, no norm" if variant else {
        "batch": "BN-LSTM (per-step statistics)", "weight": "nn.utils.weight_norm",
        "none": "LSTM cell loop, no norm"}.get(norm) or f"{describe(norm)} in the LSTM cell"
    return step, f"attentive reader, bi-LSTM 240, {what}, Adam"
