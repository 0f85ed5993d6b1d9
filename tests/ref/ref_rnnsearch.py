"""Reference loss and gradients for nn/rnnsearch.c from an independent implementation (PyTorch,
float64), written from Nematus v0.3's equations (nematus/layers.py GRUStep, AttentionStep,
FeedForwardLayer; model.py Encoder, Decoder, Predictor; v0.4's label smoothing).

Run with the system Python that has torch:  /usr/bin/python3 tests/ref/ref_rnnsearch.py
Writes tests/ref/rnnsearch.bin (format: tests/ref.h).

Tiny configuration: vocabularies 6/7, dim_word 3, dim 4, batch 3, source lengths 4,2,3, target
lengths 4,3,2 (the batch of tests/test_rnnsearch.c), label smoothing 0.1, no dropout. For each
norm NAME in none, layer, rms: NAME/p/<tensor> the parameters (random, named and shaped as the C
layout: matrices (out, in), a GRU's Wc = [W_r; W_u; W_x] (3H, in), Uc likewise, gains gx = [gates
norm; proposal norm] on the input side, gh on the state side, LN biases bx, bh), NAME/loss, and
NAME/g/<tensor> the gradients.

The model here keeps Nematus' structure literally: per step matrices split by gate, separate norms
for the gates (2H) and the proposal (H), the backward encoder on the time-reversed padded batch
with its state multiplied by the mask, the forward encoder unmasked, softmax then mask and
renormalize in the attention, tf.nn.moments-style population variance.
"""
import os

import torch

import refio

torch.manual_seed(20190806)
D = torch.float64
VS, VT, E, H, B, TX, TY = 6, 7, 3, 4, 3, 4, 4
C = A = 2 * H
SRC = [1, 2, 3, 4, 5, 1, 2, 5, 2, 3, 5, 5]
SLEN = [4, 2, 3]
TGT = [2, 3, 4, 5, 6, 0, 1, 0, 6, 0, 4, 6]
TLEN = [4, 3, 2]
LS = 0.1
EPS = 1e-5


def shapes(kind):
    """(name, shape) of every tensor, as nn/rnnsearch.c lays them out."""
    out = [("emb_src", (VS, E)), ("emb_tgt", (VT, E))]

    def gru(p, e):
        out.extend([(p + "Wc", (3 * H, e)), (p + "bc", (3 * H,)), (p + "Uc", (3 * H, H))])
        if kind != "none":
            out.extend([(p + "gx", (3 * H,)), (p + "gh", (3 * H,))])
        if kind == "layer":
            out.extend([(p + "bx", (3 * H,)), (p + "bh", (3 * H,))])

    def dense(p, o, i, bias=True):
        out.append((p + ".W", (o, i)))
        if bias:
            out.append((p + ".b", (o,)))
        if kind != "none":
            out.append((p + ".g", (o,)))
        if kind == "layer":
            out.append((p + ".beta", (o,)))

    gru("enc_f.", E)
    gru("enc_b.", E)
    dense("init", H, C)
    gru("dec1.", E)
    dense("att_ctx", A, C)
    dense("att_st", A, H, bias=False)
    out.append(("att_v", (A,)))
    gru("dec2.", C)
    dense("out_emb", E, E)
    dense("out_st", E, H)
    dense("out_ctx", E, C)
    out.append(("logit.W", (VT, E)))
    out.append(("logit.b", (VT,)))
    return out


def run(kind):
    P = {}
    for name, shp in shapes(kind):
        base = 1.0 if (name.endswith(".g") or name.endswith("gx") or name.endswith("gh")) else 0.0
        P[name] = (base + 0.5 * torch.randn(shp, dtype=D)).requires_grad_(True)

    def norm(x, g, b):
        if kind == "none":
            return x
        if kind == "layer":
            m = x.mean(-1, keepdim=True)
            v = ((x - m) ** 2).mean(-1, keepdim=True)
            return (x - m) / torch.sqrt(v + EPS) * g + b
        ms = (x * x).mean(-1, keepdim=True)
        return x * torch.rsqrt(ms + EPS) * g

    def gp(name, lo, hi):
        t = P.get(name)
        return None if t is None else t[lo:hi]

    class GRUStep:
        def __init__(self, p, compat):
            self.p, self.compat = p, compat
            Wc, Uc, bc = P[p + "Wc"], P[p + "Uc"], P[p + "bc"]
            # Nematus' variables in its (in, out) layout
            self.input_to_gates = Wc[: 2 * H].t()
            self.input_to_proposal = Wc[2 * H :].t()
            self.state_to_gates = Uc[: 2 * H].t()
            self.state_to_proposal = Uc[2 * H :].t()
            self.gates_bias, self.proposal_bias = bc[: 2 * H], bc[2 * H :]

        def n(self, x, side, lo, hi):
            return norm(x, gp(self.p + "g" + side, lo, hi), gp(self.p + "b" + side, lo, hi))

        def forward(self, prev, x):
            gx = x @ self.input_to_gates
            px = x @ self.input_to_proposal
            gs = prev @ self.state_to_gates
            ps = prev @ self.state_to_proposal
            if self.compat:
                gs = gs + self.gates_bias
                ps = ps + self.proposal_bias
            else:
                gx = gx + self.gates_bias
                px = px + self.proposal_bias
            gx, px = self.n(gx, "x", 0, 2 * H), self.n(px, "x", 2 * H, 3 * H)
            gs, ps = self.n(gs, "h", 0, 2 * H), self.n(ps, "h", 2 * H, 3 * H)
            gates = torch.sigmoid(gx + gs)
            r, u = gates[:, :H], gates[:, H:]
            prop = torch.tanh(ps * r + px)
            return u * prev + (1 - u) * prop

    def ff(p, x, act):
        y = x @ P[p + ".W"].t()
        if p + ".b" in P:
            y = y + P[p + ".b"]
        return act(norm(y, P.get(p + ".g"), P.get(p + ".beta")))

    src = torch.tensor(SRC).view(TX, B)
    tgt = torch.tensor(TGT).view(TY, B)
    xm = torch.tensor([[1.0 if t < SLEN[b] else 0.0 for b in range(B)] for t in range(TX)], dtype=D)
    ym = torch.tensor([[1.0 if t < TLEN[b] else 0.0 for b in range(B)] for t in range(TY)], dtype=D)
    # encoder
    embs = P["emb_src"][src]
    fwd = GRUStep("enc_f.", False)
    bwd = GRUStep("enc_b.", False)
    h = torch.zeros(B, H, dtype=D)
    fs = []
    for t in range(TX):
        h = fwd.forward(h, embs[t])
        fs.append(h)
    h = torch.zeros(B, H, dtype=D)
    bs = []
    for t in reversed(range(TX)):
        h = bwd.forward(h, embs[t]) * xm[t].unsqueeze(1)
        bs.append(h)
    bs = bs[::-1]
    ctx = torch.stack([torch.cat([fs[t], bs[t]], 1) for t in range(TX)])  # (TX, B, C)
    # decoder
    cmean = (ctx * xm.unsqueeze(2)).sum(0) / xm.sum(0).unsqueeze(1)
    state = ff("init", cmean, torch.tanh)
    hc = ff("att_ctx", ctx, lambda y: y)
    yemb = torch.cat([torch.zeros(1, B, E, dtype=D), P["emb_tgt"][tgt[:-1]]], 0)
    g1 = GRUStep("dec1.", False)
    g2 = GRUStep("dec2.", True)
    states, atts = [], []
    for t in range(TY):
        s1 = g1.forward(state, yemb[t])
        hs = ff("att_st", s1, lambda y: y)
        sc = torch.tanh(hc + hs.unsqueeze(0)) @ P["att_v"]  # (TX, B)
        sc = sc - sc.max(0, keepdim=True)[0]
        sc = torch.exp(sc) * xm
        al = sc / sc.sum(0, keepdim=True)
        att = (ctx * al.unsqueeze(2)).sum(0)
        state = g2.forward(s1, att)
        states.append(state)
        atts.append(att)
    S = torch.stack(states)
    CT = torch.stack(atts)
    hid = torch.tanh(
        ff("out_emb", yemb, lambda y: y) + ff("out_st", S, lambda y: y) + ff("out_ctx", CT, lambda y: y)
    )
    logits = hid @ P["logit.W"].t() + P["logit.b"]
    logp = torch.log_softmax(logits, -1)
    q = torch.full((TY, B, VT), LS / VT, dtype=D)
    q.scatter_(2, tgt.unsqueeze(2), 1 - LS + LS / VT)
    cost = -(q * logp).sum(-1) * ym
    loss = cost.sum(0).mean()
    loss.backward()
    out = [(kind + "/loss", [loss.item()])]
    for name, _ in shapes(kind):
        out.append((kind + "/p/" + name, P[name].detach().numpy()))
        out.append((kind + "/g/" + name, P[name].grad.numpy()))
    return out


tensors = []
for k in ("none", "layer", "rms"):
    tensors += run(k)
refio.write(os.path.join(os.path.dirname(os.path.abspath(__file__)), "rnnsearch.bin"), tensors)
