"""Reference tensors for nn/transformer.c from an independent implementation (PyTorch, float64).

Run with the system Python that has torch:  /usr/bin/python3 tests/ref/ref_transformer.py
Writes tests/ref/transformer.bin (format: tests/ref.h).

The model is written here from the equations (Vaswani et al. 2017 as the `zero` toolkit builds
it; nn/transformer.h): not torch.nn.Transformer, whose post-norm layer has no embedding bias,
no zero-style label smoothing and packs its maps differently. Names follow nb_tf_tensors():
emb (shared source/target embedding, also the output projection), emb_b, and per sub-layer
"enc.I.self.", "enc.I.ffn.", "dec.I.self.", "dec.I.cross.", "dec.I.ffn." with a.w/a.b (the first
map, (out, in)), kv.w/kv.b (cross), o.w/o.b, norm.g/norm.b; enc.fin.*, dec.fin.* for pre-norm.

Cases NAME = {none,layer,rms}_{post,pre}: NAME.cfg = [kind, pre, V, d, H, F, layers_enc,
layers_dec, B, S, T, eps, label_smooth, pad, bos, eos], NAME.src (B,S), NAME.tgt (B,T) (token
ids as float), every parameter NAME.p.<tensor>, the loss NAME.loss and gradients NAME.g.<tensor>.
"""
import math
import os

import torch

import refio

torch.manual_seed(20191016)
D = torch.float64
out = []
KINDS = {"none": 0, "layer": 3, "rms": 4}
V, d, H, F, LE, LD, B, S, T = 11, 8, 2, 12, 2, 2, 3, 5, 6
EPS, LS, PAD, BOS, EOS = 1e-5, 0.1, 0, 1, 2


def put(name, t):
    out.append((name, t.detach().cpu().numpy() if torch.is_tensor(t) else t))


def norm(kind, x, p, pfx):
    if kind == "none":
        return x
    if kind == "layer":
        mu = x.mean(-1, keepdim=True)
        var = ((x - mu) ** 2).mean(-1, keepdim=True)
        return (x - mu) / torch.sqrt(var + EPS) * p[pfx + "g"] + p[pfx + "b"]
    ms = (x ** 2).mean(-1, keepdim=True)
    return x / torch.sqrt(ms + EPS) * p[pfx + "g"]


def timing(L):
    n = d // 2
    inc = math.log(1e4) / (n - 1)
    pos = torch.arange(L, dtype=D)[:, None]
    inv = torch.exp(-inc * torch.arange(n, dtype=D))[None, :]
    return torch.cat([torch.sin(pos * inv), torch.cos(pos * inv)], 1)


def mha(p, pfx, xq, xkv, allowed, self_att):
    # xq (B, Tq, d), xkv (B, Tk, d); allowed (B, Tq, Tk) bool
    if self_att:
        h = xq @ p[pfx + "a.w"].T + p[pfx + "a.b"]
        q, k, v = h[..., :d], h[..., d:2 * d], h[..., 2 * d:]
    else:
        q = xq @ p[pfx + "a.w"].T + p[pfx + "a.b"]
        h = xkv @ p[pfx + "kv.w"].T + p[pfx + "kv.b"]
        k, v = h[..., :d], h[..., d:]
    dh = d // H
    outs = []
    for hh in range(H):
        sl = slice(hh * dh, (hh + 1) * dh)
        s = (q[..., sl] @ k[..., sl].transpose(1, 2)) / math.sqrt(dh)
        s = s.masked_fill(~allowed, float("-inf"))
        outs.append(torch.softmax(s, -1) @ v[..., sl])
    c = torch.cat(outs, -1)
    return c @ p[pfx + "o.w"].T + p[pfx + "o.b"]


def ffn(p, pfx, x):
    h = torch.relu(x @ p[pfx + "a.w"].T + p[pfx + "a.b"])
    return h @ p[pfx + "o.w"].T + p[pfx + "o.b"]


def block(kind, pre, p, pfx, x, f):
    if pre:
        return x + f(norm(kind, x, p, pfx + "norm."))
    return norm(kind, x + f(x), p, pfx + "norm.")


def model_loss(kind, pre, p, src, tgt):
    slen = (src != PAD).sum(1)
    tlen = (tgt != PAD).sum(1)
    E = p["emb"]
    x = E[src] * math.sqrt(d) + p["emb_b"] + timing(S)
    kmask = (torch.arange(S)[None, :] < slen[:, None])  # (B, S)
    enc_allowed = kmask[:, None, :].expand(B, S, S)
    for i in range(LE):
        x = block(kind, pre, p, f"enc.{i}.self.", x,
                  lambda u, i=i: mha(p, f"enc.{i}.self.", u, u, enc_allowed, True))
        x = block(kind, pre, p, f"enc.{i}.ffn.", x, lambda u, i=i: ffn(p, f"enc.{i}.ffn.", u))
    if pre:
        x = norm(kind, x, p, "enc.fin.")
    enc = x
    prev = torch.cat([torch.full((B, 1), BOS, dtype=torch.long), tgt[:, :-1]], 1)
    y = E[prev] * math.sqrt(d) + p["emb_b"] + timing(T)
    causal = torch.tril(torch.ones(T, T, dtype=torch.bool))[None].expand(B, T, T)
    cross_allowed = kmask[:, None, :].expand(B, T, S)
    for i in range(LD):
        y = block(kind, pre, p, f"dec.{i}.self.", y,
                  lambda u, i=i: mha(p, f"dec.{i}.self.", u, u, causal, True))
        y = block(kind, pre, p, f"dec.{i}.cross.", y,
                  lambda u, i=i: mha(p, f"dec.{i}.cross.", u, enc, cross_allowed, False))
        y = block(kind, pre, p, f"dec.{i}.ffn.", y, lambda u, i=i: ffn(p, f"dec.{i}.ffn.", u))
    if pre:
        y = norm(kind, y, p, "dec.fin.")
    logits = y @ E.T
    logp = torch.log_softmax(logits, -1)
    pt, q = 1 - LS, LS / (V - 1)
    target = torch.full((B, T, V), q, dtype=D)
    target.scatter_(2, tgt[:, :, None], pt)
    ent = -(pt * math.log(pt) + (V - 1) * q * math.log(q + 1e-20))
    ce = -(target * logp).sum(-1) - ent
    valid = (torch.arange(T)[None, :] < tlen[:, None]).to(D)
    return ((ce * valid).sum(1) / tlen.to(D)).mean()


def params(kind, pre):
    p = {}

    def lin(name, o, i):
        p[name + ".w"] = torch.randn(o, i, dtype=D) * (0.6 / math.sqrt(i))
        p[name + ".b"] = torch.randn(o, dtype=D) * 0.1

    def nrm(name):
        if kind != "none":
            p[name + "g"] = 1 + 0.2 * torch.randn(d, dtype=D)
        if kind == "layer":
            p[name + "b"] = 0.1 * torch.randn(d, dtype=D)

    p["emb"] = torch.randn(V, d, dtype=D) / math.sqrt(d)
    p["emb_b"] = 0.1 * torch.randn(d, dtype=D)
    for i in range(LE):
        nrm(f"enc.{i}.self.norm.")
        lin(f"enc.{i}.self.a", 3 * d, d)
        lin(f"enc.{i}.self.o", d, d)
        nrm(f"enc.{i}.ffn.norm.")
        lin(f"enc.{i}.ffn.a", F, d)
        lin(f"enc.{i}.ffn.o", d, F)
    for i in range(LD):
        nrm(f"dec.{i}.self.norm.")
        lin(f"dec.{i}.self.a", 3 * d, d)
        lin(f"dec.{i}.self.o", d, d)
        nrm(f"dec.{i}.cross.norm.")
        lin(f"dec.{i}.cross.a", d, d)
        lin(f"dec.{i}.cross.kv", 2 * d, d)
        lin(f"dec.{i}.cross.o", d, d)
        nrm(f"dec.{i}.ffn.norm.")
        lin(f"dec.{i}.ffn.a", F, d)
        lin(f"dec.{i}.ffn.o", d, F)
    if pre:
        nrm("enc.fin.")
        nrm("dec.fin.")
    return {k: v.requires_grad_(True) for k, v in p.items()}


def case(kind, pre):
    name = f"{kind}_{'pre' if pre else 'post'}"
    slen, tlen = [5, 3, 1], [6, 4, 2]
    src = torch.full((B, S), PAD, dtype=torch.long)
    tgt = torch.full((B, T), PAD, dtype=torch.long)
    for b in range(B):
        src[b, :slen[b]] = torch.randint(3, V, (slen[b],))
        tgt[b, :tlen[b] - 1] = torch.randint(3, V, (tlen[b] - 1,))
        tgt[b, tlen[b] - 1] = EOS
    p = params(kind, pre)
    loss = model_loss(kind, pre, p, src, tgt)
    loss.backward()
    put(name + ".cfg", [KINDS[kind], int(pre), V, d, H, F, LE, LD, B, S, T, EPS, LS, PAD, BOS, EOS])
    put(name + ".src", src.to(D))
    put(name + ".tgt", tgt.to(D))
    for k, v in p.items():
        put(name + ".p." + k, v)
        put(name + ".g." + k, v.grad)
    put(name + ".loss", loss.reshape(1))


for kind in ["none", "layer", "rms"]:
    for pre in [False, True]:
        case(kind, pre)

refio.write(os.path.join(os.path.dirname(os.path.abspath(__file__)), "transformer.bin"), out)
