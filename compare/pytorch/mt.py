"""mt: one training step of `normbench bench step mt` (tasks/mt.c's mt_bench_open) in PyTorch, for
both models, on the same generated batch: B sentence pairs of 30 tokens each side (every
sentence full length, the target ending in its eos), vocabularies of 8,000.

--model rnnsearch (nn/rnnsearch.h; docs/papers.md#mt): embeddings --dim-word (512), GRU states
--dim (1024), context and attention width 2*dim; a bidirectional GRU encoder, s_-1 =
tanh(N(mean_j ctx_j Wi + bi)), Hc = N(ctx Wac + bac) once per sentence; per target position the
conditional GRU (GRU1 over the previous word's embedding, MLP attention v . tanh(Hc + N(s1 Was)),
GRU2 over the context); the deep output tanh(N(ye Wpe + bpe) + N(s Wps + bps) + N(c Wpc + bpc)),
logits over the target vocabulary, label-smoothed cross-entropy (--label-smoothing, 0.1; the
smoothing spread over all V tokens as Nematus) summed per sentence and averaged over the batch;
Adam lr 1e-4, the global gradient norm clipped at 1. `none`: PyTorch's fused nn.GRU
(bidirectional) in the encoder and nn.GRUCell in the decoder. layer, rms, prms: an LN-GRU cell
composed of PyTorch ops with the norms where nn/gru.h puts them (four per step: the 2H gate part
and the H candidate part of x Wc + bc, all steps at once, and of h Uc; LayerNorm with gain and
bias, RMS/pRMS gain only; the decoder's second GRU takes its bias on the recurrent side), and the
six norms of the dense layers above (nn.LayerNorm; the composite RMSNorm of norms.py).

--model transformer (nn/transformer.h): torch.nn.Transformer of the --preset's shapes (small:
3+3 layers, d 256, 4 heads, ff 1024, dropout 0.3 on the residual branches, the attention weights
and the feed-forward hidden layer; base: 6+6, 512, 8, 2048, 0.1), batch-first, one embedding
matrix for source, target and the output projection (tied), x = E[tok] sqrt(d) + b + PE, dropout
on the embeddings, the decoder's self-attention causal, the label-smoothed cross-entropy, Adam
(0.9, 0.98, 1e-9) lr 1e-4 without clipping (as normbench's benchmark). --norm-position post: no
final norm (normbench's post-norm stacks have none; nn.Transformer's default would add one); pre:
norm_first=True and a final norm on each stack. layer: nn.Transformer's own nn.LayerNorm; rms,
prms: each norm module replaced by the composite RMSNorm (gain only, as zero's rms_norm); none:
by nn.Identity."""
import math

import torch
import torch.nn as nn
import torch.nn.functional as F

from norms import describe, has_shift, norm_info, row_norm

V, T = 8000, 30  # tasks/mt.c: BENCH_V, BENCH_LEN
EXTRAS = []
PRESETS = {"small": (3, 3, 256, 4, 1024, 0.3), "base": (6, 6, 512, 8, 2048, 0.1)}
# options of `mt` that do not change normbench's benchmark step (data, evaluation, schedule,
# initial values): taken and ignored
NO_EFFECT = {"bpe-merges", "max-len", "maxibatch", "beam", "eval-every", "val-bleu-max",
             "test-max", "dropout-source", "dropout-target", "init-scale", "init-center",
             "warmup"}
CFG = {"model": "rnnsearch", "dim-word": 512, "dim": 1024, "preset": "small",
       "norm-position": "post", "label-smoothing": 0.1}


def configure(opts):
    for name, value in opts.items():
        if name in NO_EFFECT:
            continue
        if name not in CFG or value is None:
            raise ValueError(f"--{name} has no PyTorch form in compare/pytorch/mt.py")
        if name in ("dim-word", "dim"):
            CFG[name] = int(value)
        elif name == "label-smoothing":
            CFG[name] = float(value)
        else:
            CFG[name] = value
    if CFG["model"] not in ("rnnsearch", "transformer"):
        raise ValueError(f"no PyTorch form of --model {CFG['model']}")
    if CFG["preset"] not in PRESETS:
        raise ValueError(f"no PyTorch form of --preset {CFG['preset']}")
    if CFG["norm-position"] not in ("post", "pre"):
        raise ValueError(f"no PyTorch form of --norm-position {CFG['norm-position']}")


# ---- RNNSearch ----------------------------------------------------------------------------------

def nrm(norm, n):
    """The norm of a dense layer's output: gain, and bias where the norm has one (layer, dyt)."""
    return row_norm(norm, n, eps=1e-5, bias=has_shift(norm))


class NormGRU(nn.Module):
    """The GRU of nn/gru.h with a norm: xn = Nx(x Wc + bc), hn = Nh(h Uc), each over the 2H gate
    part and the H candidate part; r, u = sigmoid(xn_g + hn_g), c = tanh(r hn_c + xn_c),
    h' = u h + (1 - u) c. bias_state: bc on the recurrent side, inside Nh (the decoder's GRU2)."""

    def __init__(self, n_in, H, norm, bias_state=False):
        super().__init__()
        self.H = H
        self.W = nn.Linear(n_in, 3 * H, bias=not bias_state)
        self.U = nn.Linear(H, 3 * H, bias=bias_state)
        self.nx = nn.ModuleList([nrm(norm, 2 * H), nrm(norm, H)])
        self.nh = nn.ModuleList([nrm(norm, 2 * H), nrm(norm, H)])

    def inputs(self, x):  # (..., n_in) -> the normalized input sides (..., 2H), (..., H)
        xp = self.W(x)
        return self.nx[0](xp[..., : 2 * self.H]), self.nx[1](xp[..., 2 * self.H:])

    def step(self, xg, xc, h):
        hp = self.U(h)
        hg, hc = self.nh[0](hp[:, : 2 * self.H]), self.nh[1](hp[:, 2 * self.H:])
        r, u = torch.sigmoid(xg + hg).chunk(2, dim=-1)
        c = torch.tanh(r * hc + xc)
        return u * h + (1 - u) * c

    def forward(self, x):  # (T, B, n_in) from h = 0 -> states (T, B, H)
        xg, xc = self.inputs(x)
        h = x.new_zeros(x.shape[1], self.H)
        out = []
        for t in range(x.shape[0]):
            h = self.step(xg[t], xc[t], h)
            out.append(h)
        return torch.stack(out)


class RNNSearch(nn.Module):
    def __init__(self, norm, E, H):
        super().__init__()
        if norm != "none" and norm_info(norm)[0] != "rows":
            raise ValueError(f"no PyTorch form of rnnsearch with '{norm}' here")
        C = A = 2 * H
        self.norm, self.H = norm, H
        self.emb_s, self.emb_t = nn.Embedding(V, E), nn.Embedding(V, E)
        plain = norm == "none"
        if plain:
            self.enc = nn.GRU(E, H, bidirectional=True)
            self.dec1, self.dec2 = nn.GRUCell(E, H), nn.GRUCell(C, H)
        else:
            self.encf, self.encb = NormGRU(E, H, norm), NormGRU(E, H, norm)
            self.dec1, self.dec2 = NormGRU(E, H, norm), NormGRU(C, H, norm, bias_state=True)
        ident = nn.Identity
        self.init, self.ninit = nn.Linear(C, H), ident() if plain else nrm(norm, H)
        self.ac, self.nac = nn.Linear(C, A), ident() if plain else nrm(norm, A)
        self.as_, self.nas = nn.Linear(H, A, bias=False), ident() if plain else nrm(norm, A)
        self.v = nn.Parameter(torch.randn(A) * 0.01)
        self.pe, self.npe = nn.Linear(E, E), ident() if plain else nrm(norm, E)
        self.ps, self.nps = nn.Linear(H, E), ident() if plain else nrm(norm, E)
        self.pc, self.npc = nn.Linear(C, E), ident() if plain else nrm(norm, E)
        self.out = nn.Linear(E, V)

    def forward(self, src, tgt, ls):  # src, tgt (T, B) time-major, as normbench
        B = src.shape[1]
        xs = self.emb_s(src)
        if self.norm == "none":
            ctx = self.enc(xs)[0]
        else:
            ctx = torch.cat([self.encf(xs), self.encb(xs.flip(0)).flip(0)], dim=-1)
        s = torch.tanh(self.ninit(self.init(ctx.mean(0))))
        hc = self.nac(self.ac(ctx))  # (Tx, B, A)
        ye = torch.cat([xs.new_zeros(1, B, xs.shape[2]), self.emb_t(tgt[:-1])])
        if self.norm != "none":
            x1g, x1c = self.dec1.inputs(ye)  # every step's input side at once
        states, ctxs = [], []
        for t in range(tgt.shape[0]):
            s1 = self.dec1(ye[t], s) if self.norm == "none" else self.dec1.step(x1g[t], x1c[t], s)
            hs = self.nas(self.as_(s1))
            a = torch.softmax(torch.tanh(hc + hs) @ self.v, dim=0)  # (Tx, B)
            c = torch.einsum("jb,jbc->bc", a, ctx)
            if self.norm == "none":
                s = self.dec2(c, s1)
            else:
                x2g, x2c = self.dec2.inputs(c)
                s = self.dec2.step(x2g, x2c, s1)
            states.append(s)
            ctxs.append(c)
        st, ct = torch.stack(states), torch.stack(ctxs)
        o = torch.tanh(self.npe(self.pe(ye)) + self.nps(self.ps(st)) + self.npc(self.pc(ct)))
        logits = self.out(o)
        return F.cross_entropy(logits.view(-1, V), tgt.reshape(-1), label_smoothing=ls,
                               reduction="sum") / B


def build_rnnsearch(norm, batch):
    E, H, ls = CFG["dim-word"], CFG["dim"], CFG["label-smoothing"]
    model = RNNSearch(norm, E, H)
    params = list(model.parameters())
    opt = torch.optim.Adam(params, lr=1e-4)
    src = torch.randint(4, V, (T, batch))
    tgt = torch.randint(4, V, (T, batch))
    tgt[-1] = 2  # eos

    def step():
        opt.zero_grad()
        model(src, tgt, ls).backward()
        nn.utils.clip_grad_norm_(params, 1.0)
        opt.step()

    what = ("fused nn.GRU (bidirectional) and nn.GRUCell x2, no norm" if norm == "none"
            else f"LN-GRU cells of PyTorch ops, {describe(norm)}")
    return step, f"RNNSearch emb {E} hidden {H}, {T}+{T} tokens, {what}, Adam"


# ---- Transformer --------------------------------------------------------------------------------

class Transformer(nn.Module):
    def __init__(self, norm, pre):
        super().__init__()
        le, ld, d, heads, ffn, p = PRESETS[CFG["preset"]]
        self.d = d
        self.emb = nn.Embedding(V, d)
        self.emb_b = nn.Parameter(torch.zeros(d))
        pos = torch.arange(T, dtype=torch.float32).unsqueeze(1)
        freq = torch.exp(-math.log(1e4) * torch.arange(d // 2, dtype=torch.float32) / (d // 2 - 1))
        self.register_buffer("pe", torch.cat([torch.sin(pos * freq), torch.cos(pos * freq)], 1))
        self.drop = nn.Dropout(p)
        el = nn.TransformerEncoderLayer(d, heads, ffn, p, batch_first=True, norm_first=pre)
        dl = nn.TransformerDecoderLayer(d, heads, ffn, p, batch_first=True, norm_first=pre)
        enc = nn.TransformerEncoder(el, le, norm=nn.LayerNorm(d) if pre else None)
        dec = nn.TransformerDecoder(dl, ld, norm=nn.LayerNorm(d) if pre else None)
        self.tf = nn.Transformer(d, heads, custom_encoder=enc, custom_decoder=dec,
                                 batch_first=True)
        if norm != "layer":  # every norm module replaced
            for mod in list(self.tf.modules()):
                for name, child in list(mod.named_children()):
                    if isinstance(child, nn.LayerNorm):
                        setattr(mod, name, nn.Identity() if norm == "none"
                                else row_norm(norm, d, eps=1e-5, bias=has_shift(norm)))
        self.register_buffer("causal", self.tf.generate_square_subsequent_mask(T))

    def embed(self, tok):
        return self.drop(self.emb(tok) * math.sqrt(self.d) + self.emb_b + self.pe[: tok.shape[1]])

    def forward(self, src, tgt_in, tgt, pad_src, pad_tgt, ls):
        h = self.tf(self.embed(src), self.embed(tgt_in), tgt_mask=self.causal,
                    src_key_padding_mask=pad_src, tgt_key_padding_mask=pad_tgt,
                    memory_key_padding_mask=pad_src)
        logits = h @ self.emb.weight.t()  # tied output projection, no bias
        return F.cross_entropy(logits.reshape(-1, V), tgt.reshape(-1), label_smoothing=ls)


def build_transformer(norm, batch):
    if norm != "none" and norm_info(norm)[0] != "rows":
        raise ValueError(f"no PyTorch form of the transformer with '{norm}' here")
    pre = CFG["norm-position"] == "pre"
    model = Transformer(norm, pre)
    model.train()
    opt = torch.optim.Adam(model.parameters(), lr=1e-4, betas=(0.9, 0.98), eps=1e-9)
    src = torch.randint(3, V, (batch, T))
    tgt = torch.randint(3, V, (batch, T))
    tgt[:, -1] = 2  # eos
    tgt_in = torch.cat([torch.ones(batch, 1, dtype=torch.long), tgt[:, :-1]], 1)  # bos 1
    pad = torch.zeros(batch, T, dtype=torch.bool)  # no padding: every sentence T tokens
    ls = CFG["label-smoothing"]

    def step():
        opt.zero_grad()
        model(src, tgt_in, tgt, pad, pad, ls).backward()
        opt.step()

    le, ld, d, heads, ffn, p = PRESETS[CFG["preset"]]
    what = "nn.Identity for the norms" if norm == "none" else describe(norm)
    return step, (f"nn.Transformer {le}+{ld} d {d} ff {ffn}, {CFG['norm-position']}-norm, "
                  f"{batch}x{T} tokens, {what}, Adam")


def build(norm, variant, batch):
    if variant:
        raise ValueError(f"no variant '{variant}' for mt")
    torch.set_flush_denormal(True)  # as normbench's mt (flush_denormals)
    if CFG["model"] == "transformer":
        return build_transformer(norm, batch)
    return build_rnnsearch(norm, batch)
