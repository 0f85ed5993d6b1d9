"""Reference tensors for nn/reader.c (the attentive reader) from an independent implementation
(PyTorch, float64, per-step LSTM loops, autograd for the gradients), without dropout and with
the dropout masks normbench drew.

Run with the system Python that has torch:
    NORMBENCH_REF_DUMP=tests/ref build/tests/test_reader_model   # writes tests/ref/reader_masks.bin
    /usr/bin/python3 tests/ref/ref_reader.py
Writes tests/ref/reader.bin (format: tests/ref.h), read by tests/test_reader_model.c. For every
norm and bidirectional in (0, 1), NAME = "<norm>.<bidir>": NAME.p (the flat parameter buffer in
nn/reader.c's layout, offsets aligned to 16 values), NAME.loss (the mean cross-entropy),
NAME.probs (B,V) and NAME.grad (flat, as p). Inputs are fixed below and in the C test.
NAME.drop.loss, .probs, .grad: the same parameters in a training forward with dropout (keep 0.5),
using the masks the C model drew from its dropout stream (the script cannot draw them), read
from reader_masks.bin and copied into reader.bin as masks.<bidir>.{kd,kq,kg,kdr,kqr}: passage and
question embeddings (kd, kq), the output layer (kg), and, bidirectional, the backward encoders'
own embedding masks (kdr, kqr): as in the authors' model.py, where build_bidir_model embeds the
passage and its reversed copy separately, the two directions see independent masks.
NAME "batch-everywhere.<bidir>" is norm batch with bn_everywhere: the attention and output
feed-forward layers batch-normalized too (Cooijmans' bnff: BN(x W^T) * gamma + beta, biased batch
variance, att_ctx's statistics over all B x TD passage positions, padding included).
"""
import math
import os

import torch

import refio

torch.manual_seed(20261124)
Dt = torch.float64
B, TD, TQ, V, D = 3, 5, 3, 7, 3
TOKD = [[1, 2, 3, 4, 5], [6, 5, 4, 0, 6], [2, 2, 3, 1, 0]]
LEND = [5, 3, 4]
TOKQ = [[3, 1, 0], [4, 4, 6], [5, 2, 3]]
LENQ = [2, 3, 1]
YS = [3, 6, 2]
EPS, P = 1e-5, 0.3


def lstm_layout(prefix, kind, H, C):
    G = 4 * H
    t = [("W", G * C), ("U", G * H), ("b", G), ("h0", H)]
    if kind == "weight":
        t += [("Wg", G), ("Ug", G)]
    if kind in ("layer", "rms", "prms", "batch"):
        t += [("s1", G), ("s2", G), ("s3", H)]
    if kind == "layer":
        t += [("b1", G), ("b2", G)]
    if kind in ("layer", "batch"):
        t += [("b3", H)]
    return [(prefix + n, s) for n, s in t]


def layout(kind, bidir, every=False):
    X = 2 * D if bidir else D
    t = [("emb", V * D)]
    t += lstm_layout("enc_d.", kind, D, D) + lstm_layout("enc_q.", kind, D, D)
    if bidir:
        t += lstm_layout("enc_d_r.", kind, D, D) + lstm_layout("enc_q_r.", kind, D, D)
    gain = lambda name: [(name, D)] if every else []
    t += ([("att_bi", X * X), ("att_ctx.W", D * X), ("att_ctx.b", D)] + gain("att_ctx.gamma")
          + [("att_q.W", D * X)] + gain("att_q.gamma") + [("att_proj.W", D), ("out_ctx.W", D * X)]
          + gain("out_ctx.gamma") + [("out_q.W", D * X), ("out_q.b", D)] + gain("out_q.gamma")
          + [("out_mean.W", D * X)] + gain("out_mean.gamma")
          + [("logit.W", V * D), ("logit.b", V)])
    offs, end = [], 0
    for name, n in t:
        off = (end + 15) // 16 * 16
        offs.append((name, off, n))
        end = off + n
    return offs, end


def ln(x, g, b):
    mu = x.mean(1, keepdim=True)
    return (x - mu) / torch.sqrt(((x - mu) ** 2).mean(1, keepdim=True) + EPS) * g + b


def rms(x, g, k):
    return x / torch.sqrt((x[:, :k] ** 2).mean(1, keepdim=True) + EPS) * g


def bn(x, g, b=None):
    mu = x.mean(0, keepdim=True)
    y = (x - mu) / torch.sqrt(((x - mu) ** 2).mean(0, keepdim=True) + EPS) * g
    return y + b if b is not None else y


def lstm(p, pre, x, lens, reverse, kind):
    """x (B,T,C); returns out (B,T,H) aligned with x and the final state."""
    Bn, T, C = x.shape
    H = D
    G = 4 * H
    W, U = p[pre + "W"].view(G, C), p[pre + "U"].view(G, H)
    if kind == "weight":
        W = p[pre + "Wg"][:, None] * W / W.norm(dim=1, keepdim=True)
        U = p[pre + "Ug"][:, None] * U / U.norm(dim=1, keepdim=True)
    k1, k3 = (math.ceil(G * P), math.ceil(H * P)) if kind == "prms" else (G, H)
    a_all = x @ W.T + p[pre + "b"]
    h = p[pre + "h0"].expand(Bn, H)
    c = torch.zeros(Bn, H, dtype=Dt)
    out = [[None] * T for _ in range(Bn)]
    for t in range(T):
        pos = [(lens[i] - 1 - t if reverse and t < lens[i] else t) for i in range(Bn)]
        a = torch.stack([a_all[i, pos[i]] for i in range(Bn)])
        r = h @ U.T
        if kind == "layer":
            z = ln(a, p[pre + "s1"], p[pre + "b1"]) + ln(r, p[pre + "s2"], p[pre + "b2"])
        elif kind in ("rms", "prms"):
            z = rms(a, p[pre + "s1"], k1) + rms(r, p[pre + "s2"], k1)
        elif kind == "batch":
            z = bn(a, p[pre + "s1"]) + bn(r, p[pre + "s2"])
        else:
            z = a + r
        z = z + p[pre + "b"]
        i_, f_, o_ = (torch.sigmoid(z[:, j * H:(j + 1) * H]) for j in range(3))
        g_ = torch.tanh(z[:, 3 * H:])
        m = torch.tensor([1.0 if t < lens[i] else 0.0 for i in range(Bn)], dtype=Dt)[:, None]
        c = m * (f_ * c + i_ * g_) + (1 - m) * c
        if kind == "layer":
            cc = ln(c, p[pre + "s3"], p[pre + "b3"])
        elif kind in ("rms", "prms"):
            cc = rms(c, p[pre + "s3"], k3)
        elif kind == "batch":
            cc = bn(c, p[pre + "s3"], p[pre + "b3"])
        else:
            cc = c
        h = m * (o_ * torch.tanh(cc)) + (1 - m) * h
        for i in range(Bn):
            out[i][pos[i]] = h[i]
    return torch.stack([torch.stack(row) for row in out]), h


def bnff(x, W, g, b=None):
    """Cooijmans' bnfflayer with activ Linear: BN over the rows of x W^T (every leading axis)."""
    z = x @ W.T
    shape = z.shape
    return bn(z.reshape(-1, shape[-1]), g, b).reshape(shape)


def reader(p, kind, bidir, every=False, mk=None):
    """mk: None (no dropout) or the masks {kd, kq, kg, kdr, kqr} (0 or 1/keep)."""
    X = 2 * D if bidir else D
    emb = p["emb"].view(V, D)
    ed, eq = emb[torch.tensor(TOKD)], emb[torch.tensor(TOKQ)]
    edr, eqr = ed, eq
    if mk is not None:
        if bidir:
            edr, eqr = ed * mk["kdr"], eq * mk["kqr"]
        ed, eq = ed * mk["kd"], eq * mk["kq"]
    hf, _ = lstm(p, "enc_d.", ed, LEND, 0, kind)
    _, qf = lstm(p, "enc_q.", eq, LENQ, 0, kind)
    if bidir:
        hb, _ = lstm(p, "enc_d_r.", edr, LEND, 1, kind)
        _, qb = lstm(p, "enc_q_r.", eqr, LENQ, 1, kind)
        P_, q = torch.cat([hf, hb], 2), torch.cat([qf, qb], 1)
    else:
        P_, q = hf, qf
    Bm = p["att_bi"].view(X, X)
    sim = ((P_ @ Bm) * (q @ Bm)[:, None, :]).sum(2)  # (B,TD): (P_t·Bm)·(q·Bm)
    Wac, Waq = p["att_ctx.W"].view(D, X), p["att_q.W"].view(D, X)
    if every:
        M = torch.tanh(bnff(P_, Wac, p["att_ctx.gamma"], p["att_ctx.b"])
                       + bnff(q, Waq, p["att_q.gamma"])[:, None, :] + sim[:, :, None])
    else:
        M = torch.tanh(P_ @ Wac.T + p["att_ctx.b"] + (q @ Waq.T)[:, None, :] + sim[:, :, None])
    sc = M @ p["att_proj.W"]
    mask = torch.tensor([[1.0 if t < LEND[b] else 0.0 for t in range(TD)] for b in range(B)],
                        dtype=Dt)
    sc = sc.masked_fill(mask == 0, float("-inf"))
    al = torch.softmax(sc, 1)
    r = (al[:, :, None] * P_).sum(1)
    pbar = (mask[:, :, None] * P_).sum(1) / mask.sum(1, keepdim=True)
    Woc, Woq, Wom = (p[n + ".W"].view(D, X) for n in ("out_ctx", "out_q", "out_mean"))
    if every:
        g = torch.tanh(bnff(r, Woc, p["out_ctx.gamma"]) + bnff(q, Woq, p["out_q.gamma"], p["out_q.b"])
                       + bnff(pbar, Wom, p["out_mean.gamma"]))
    else:
        g = torch.tanh(r @ Woc.T + q @ Woq.T + p["out_q.b"] + pbar @ Wom.T)
    if mk is not None:
        g = g * mk["kg"]
    logits = g @ p["logit.W"].view(V, D).T + p["logit.b"]
    logp = torch.log_softmax(logits, 1)
    loss = -logp[torch.arange(B), torch.tensor(YS)].mean()
    return loss, torch.softmax(logits, 1)


HERE = os.path.dirname(os.path.abspath(__file__))
dumped = refio.read(os.path.join(HERE, "reader_masks.bin"))
shapes = {"kd": (B, TD, D), "kq": (B, TQ, D), "kdr": (B, TD, D), "kqr": (B, TQ, D), "kg": (B, D)}
MASKS = {}
res = []
for bidir in (0, 1):
    MASKS[bidir] = {}
    for k, shape in shapes.items():
        name = "masks.%d.%s" % (bidir, k)
        if name in dumped:
            a = dumped[name].reshape(shape)
            MASKS[bidir][k] = torch.tensor(a, dtype=Dt)
            res.append((name, a.reshape(-1)))
for bidir in (0, 1):
    m = MASKS[bidir]
    # the two directions' masks differ (independent draws), each keeps about half
    if bidir:
        assert (m["kd"] != m["kdr"]).any() and (m["kq"] != m["kqr"]).any()

for name_ in ["none", "batch", "weight", "layer", "rms", "prms", "batch-everywhere"]:
    every = name_ == "batch-everywhere"
    kind = "batch" if every else name_
    for bidir in (0, 1):
        offs, total = layout(kind, bidir, every)
        p, flat = {}, torch.zeros(total, dtype=Dt)
        for name, off, n in offs:
            short = name.split(".")[-1]
            if short in ("s1", "s2", "s3", "Wg", "Ug", "gamma"):
                v = 1.0 + 0.3 * torch.randn(n, dtype=Dt)
            else:
                v = 0.5 * torch.randn(n, dtype=Dt)
            flat[off:off + n] = v
            p[name] = v.clone().requires_grad_(True)
        loss, probs = reader(p, kind, bidir, every)
        loss.backward()
        grad = torch.zeros(total, dtype=Dt)
        for name, off, n in offs:
            grad[off:off + n] = p[name].grad
        tag = "%s.%d." % (name_, bidir)
        res += [(tag + "p", flat.numpy()), (tag + "loss", loss.detach().reshape(1).numpy()),
                (tag + "probs", probs.detach().numpy()), (tag + "grad", grad.numpy())]
        # the same parameters with dropout: a fresh graph, the dumped masks
        pd = {name: p[name].detach().clone().requires_grad_(True) for name, _, _ in offs}
        loss, probs = reader(pd, kind, bidir, every, MASKS[bidir])
        loss.backward()
        grad = torch.zeros(total, dtype=Dt)
        for name, off, n in offs:
            grad[off:off + n] = pd[name].grad
        res += [(tag + "drop.loss", loss.detach().reshape(1).numpy()),
                (tag + "drop.probs", probs.detach().numpy()), (tag + "drop.grad", grad.numpy())]

refio.write(os.path.join(HERE, "reader.bin"), res)
print("wrote", len(res), "tensors")
