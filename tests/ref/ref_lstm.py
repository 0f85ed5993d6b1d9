"""Reference tensors for nn/lstm.c from an independent implementation (PyTorch, float64, a plain
per-step loop with explicit masks and reverse_realign-style reversal; autograd for gradients).

Run with the system Python that has torch:  /usr/bin/python3 tests/ref/ref_lstm.py
Writes tests/ref/lstm.bin (format: tests/ref.h), read by tests/test_lstm.c. For every norm and
direction, NAME = "<norm>.<reverse>": NAME.p (the flat parameter buffer in nn/lstm.c's layout:
tensors in order, each offset aligned to 16 values), NAME.x (B,T,C), NAME.wout (B,T,H),
NAME.wfin (B,H), NAME.out, NAME.final, NAME.grad (flat, as p) and NAME.dx, for the loss
L = sum(out * wout) + sum(final * wfin).
"""
import math
import os

import torch

import refio

torch.manual_seed(20261123)
D = torch.float64
B, T, C, H = 3, 4, 3, 2
G = 4 * H
LENS = [4, 2, 3]
EPS = 1e-5
P = 0.3  # pRMSNorm fraction, k = ceil(n p) as the paper
K1, K3 = math.ceil(G * P), math.ceil(H * P)


def layout(kind):
    """(name, size) in nn/lstm.c's order."""
    t = [("W", G * C), ("U", G * H), ("b", G), ("h0", H)]
    if kind == "weight":
        t += [("Wg", G), ("Ug", G)]
    if kind in ("layer", "rms", "prms", "batch"):
        t += [("s1", G), ("s2", G), ("s3", H)]
    if kind == "layer":
        t += [("b1", G), ("b2", G)]
    if kind in ("layer", "batch"):
        t += [("b3", H)]
    offs, off, end = [], 0, 0
    for name, n in t:
        off = (end + 15) // 16 * 16
        offs.append((name, off, n))
        end = off + n
    return offs, end


def ln(x, g, b):
    mu = x.mean(1, keepdim=True)
    var = ((x - mu) ** 2).mean(1, keepdim=True)
    return (x - mu) / torch.sqrt(var + EPS) * g + b


def rms(x, g, k):
    ms = (x[:, :k] ** 2).mean(1, keepdim=True)
    return x / torch.sqrt(ms + EPS) * g


def bn(x, g, b=None):
    mu = x.mean(0, keepdim=True)
    var = ((x - mu) ** 2).mean(0, keepdim=True)
    y = (x - mu) / torch.sqrt(var + EPS) * g
    return y + b if b is not None else y


def lstm(p, x, reverse, kind):
    W, U = p["W"].view(G, C), p["U"].view(G, H)
    if kind == "weight":
        W = p["Wg"][:, None] * W / W.norm(dim=1, keepdim=True)
        U = p["Ug"][:, None] * U / U.norm(dim=1, keepdim=True)
    a_all = x @ W.T + p["b"]
    h = p["h0"].expand(B, H)
    c = torch.zeros(B, H, dtype=D)
    out = [[None] * T for _ in range(B)]
    for t in range(T):
        pos = [(LENS[i] - 1 - t if reverse and t < LENS[i] else t) for i in range(B)]
        a = torch.stack([a_all[i, pos[i]] for i in range(B)])
        r = h @ U.T
        if kind == "layer":
            pre = ln(a, p["s1"], p["b1"]) + ln(r, p["s2"], p["b2"]) + p["b"]
        elif kind in ("rms", "prms"):
            k = K1 if kind == "prms" else G
            pre = rms(a, p["s1"], k) + rms(r, p["s2"], k) + p["b"]
        elif kind == "batch":
            pre = bn(a, p["s1"]) + bn(r, p["s2"]) + p["b"]
        else:
            pre = a + r + p["b"]
        i_, f_, o_ = (torch.sigmoid(pre[:, j * H:(j + 1) * H]) for j in range(3))
        g_ = torch.tanh(pre[:, 3 * H:])
        m = torch.tensor([1.0 if t < LENS[i] else 0.0 for i in range(B)], dtype=D)[:, None]
        c = m * (f_ * c + i_ * g_) + (1 - m) * c
        if kind == "layer":
            cc = ln(c, p["s3"], p["b3"])
        elif kind in ("rms", "prms"):
            cc = rms(c, p["s3"], K3 if kind == "prms" else H)
        elif kind == "batch":
            cc = bn(c, p["s3"], p["b3"])
        else:
            cc = c
        h = m * (o_ * torch.tanh(cc)) + (1 - m) * h
        for i in range(B):
            out[i][pos[i]] = h[i]
    return torch.stack([torch.stack(row) for row in out]), h


res = []
for kind in ["none", "batch", "weight", "layer", "rms", "prms"]:
    for reverse in (0, 1):
        offs, total = layout(kind)
        p = {}
        flat = torch.zeros(total, dtype=D)
        for name, off, n in offs:
            if name.startswith("s") or name.endswith("g"):
                v = 1.0 + 0.3 * torch.randn(n, dtype=D)
            else:
                v = 0.5 * torch.randn(n, dtype=D)
            flat[off:off + n] = v
            p[name] = v.clone().requires_grad_(True)
        x = torch.randn(B, T, C, dtype=D, requires_grad=True)
        wout = torch.randn(B, T, H, dtype=D)
        wfin = torch.randn(B, H, dtype=D)
        out, fin = lstm(p, x, reverse, kind)
        loss = (out * wout).sum() + (fin * wfin).sum()
        loss.backward()
        grad = torch.zeros(total, dtype=D)
        for name, off, n in offs:
            grad[off:off + n] = p[name].grad
        tag = "%s.%d." % (kind, reverse)
        for name, tns in [("p", flat), ("x", x), ("wout", wout), ("wfin", wfin), ("out", out),
                          ("final", fin), ("grad", grad), ("dx", x.grad)]:
            res.append((tag + name, tns.detach().numpy()))

refio.write(os.path.join(os.path.dirname(os.path.abspath(__file__)), "lstm.bin"), res)
print("wrote", len(res), "tensors")
