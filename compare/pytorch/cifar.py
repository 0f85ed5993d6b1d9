"""cifar: ConvPool-CNN-C as the WN code trains it (docs/papers.md#cifar-model), one training step
as `normbench bench step cifar` times it, batch 100 of 3x32x32: Gaussian noise 0.15; 3 x [conv
3x3 96 -> norm -> leaky ReLU 0.1]; max-pool 2, dropout 0.5; 3 x [conv 3x3 192 ...]; max-pool,
dropout; conv 3x3 192 pad 0; 2 x NIN 192; global average pool; dense 10 -> norm; softmax
cross-entropy; torch.optim.Adam lr 1e-3 (the WN code puts Adam's eps inside the root: the same
cost). Norms per docs/papers.md#cifar-norms: batch over N x H x W (nn.BatchNorm2d, eps 1e-6),
layer per example and channel over H x W (nn.GroupNorm with one group per channel, which is
exactly that), rms and prms the same in composite form (p 12.5 %), weight nn.utils.weight_norm,
none the baseline's frozen per-channel scale on the weights. The norm replaces the layer's bias
and brings its own per-channel gain and bias; the logits are normalized too."""
import torch
import torch.nn as nn
import torch.nn.functional as F

from norms import DyT, RMSNorm, describe, norm_info, prms_k

EXTRAS = []
EPS = 1e-6
# options of `cifar` that choose how normbench computes the same step (its convolution engine,
# the order of its gradient sums): PyTorch computes it its own way (oneDNN), so they are taken
# and ignored, and one `bench step cifar --conv E --against pytorch` compares engine E with it
HOW_ONLY = {"conv", "grad-sums"}


def configure(opts):
    for name in opts:
        if name not in HOW_ONLY:
            raise ValueError(f"--{name} has no PyTorch form in compare/pytorch/cifar.py")


class ScaledConv(nn.Module):
    """The WN code's baseline: conv with W_eff = g W, g a frozen per-channel scale, and a bias."""

    def __init__(self, conv):
        super().__init__()
        self.conv = conv
        self.register_buffer("g", torch.ones(conv.weight.shape[0]))

    def forward(self, x):
        w = self.conv.weight * self.g.view(-1, *([1] * (self.conv.weight.dim() - 1)))
        if isinstance(self.conv, nn.Linear):
            return F.linear(x, w, self.conv.bias)
        return F.conv2d(x, w, self.conv.bias, padding=self.conv.padding)


def unit(norm, layer, c, hw):
    """layer (conv or dense) -> its norm over c channels of hw positions (hw 1: dense)."""
    if norm == "none":
        return [ScaledConv(layer)]
    if norm == "weight":
        return [nn.utils.weight_norm(layer)]
    if norm == "batch":
        return [layer, nn.BatchNorm2d(c, eps=EPS) if hw > 1 else nn.BatchNorm1d(c, eps=EPS)]
    if norm == "layer":
        return [layer, nn.GroupNorm(c, c, eps=EPS) if hw > 1 else nn.LayerNorm(c, eps=EPS)]
    if norm == "dyt":  # per channel: tanh(alpha x) with a gain and bias per channel
        return [layer, DyT((c, 1, 1) if hw > 1 else c)]
    if norm in ("rms", "prms"):
        n = hw if hw > 1 else c
        k = prms_k(n, 0.125) if norm == "prms" else None
        if hw > 1:
            return [layer, RMSNorm((c, 1, 1), n, k=k, eps=EPS, dims=2)]
        return [layer, RMSNorm(c, n, k=k, eps=EPS)]
    norm_info(norm)  # an unknown name: says which norms there are
    raise ValueError(f"no PyTorch form of cifar with '{norm}'")


class Noise(nn.Module):
    def forward(self, x):
        return x + 0.15 * torch.randn_like(x) if self.training else x


def build(norm, variant, batch):
    if variant:
        raise ValueError(f"no variant '{variant}' for cifar")
    if norm == "batch" and batch < 2:
        raise ValueError("batch norm needs a batch of 2 or more")
    own_bias = norm in ("none", "weight")
    L = [Noise()]

    def conv(cin, cout, k, pad, hw):
        L.extend(unit(norm, nn.Conv2d(cin, cout, k, padding=pad, bias=own_bias), cout, hw))
        L.append(nn.LeakyReLU(0.1))

    conv(3, 96, 3, 1, 1024)
    conv(96, 96, 3, 1, 1024)
    conv(96, 96, 3, 1, 1024)
    L += [nn.MaxPool2d(2), nn.Dropout(0.5)]
    conv(96, 192, 3, 1, 256)
    conv(192, 192, 3, 1, 256)
    conv(192, 192, 3, 1, 256)
    L += [nn.MaxPool2d(2), nn.Dropout(0.5)]
    conv(192, 192, 3, 0, 36)
    conv(192, 192, 1, 0, 36)
    conv(192, 192, 1, 0, 36)
    L += [nn.AdaptiveAvgPool2d(1), nn.Flatten()]
    L += unit(norm, nn.Linear(192, 10, bias=own_bias), 10, 1)
    model = nn.Sequential(*L)
    model.train()
    opt = torch.optim.Adam([p for p in model.parameters() if p.requires_grad], lr=1e-3)
    x = torch.randn(batch, 3, 32, 32)
    y = torch.randint(0, 10, (batch,))

    def step():
        opt.zero_grad()
        F.cross_entropy(model(x), y).backward()
        opt.step()

    what = {"batch": "nn.BatchNorm2d", "layer": "nn.GroupNorm(C, C)",
            "none": "frozen per-channel scale"}.get(norm) or describe(norm)
    return step, f"ConvPool-CNN-C, {what}, Adam"
