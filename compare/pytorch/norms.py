"""Norm modules shared by the task scripts: PyTorch's own where 1.13 has one (nn.LayerNorm,
nn.BatchNorm1d/2d, nn.GroupNorm, torch.nn.utils.weight_norm), the composite form otherwise
(RMSNorm and pRMSNorm: PyTorch 1.13 has no RMS norm), written the way a PyTorch user would."""
import math

import torch
import torch.nn as nn


def prms_k(n, p=0.0625):
    """pRMSNorm's k: the first ceil(n p) values (the paper's rounding), at least 1."""
    return max(1, math.ceil(n * p))


class RMSNorm(nn.Module):
    """y = g x / sqrt(mean(x[:k]^2) + eps) (+ b), over the last `dims` dimensions; k = all of
    them (RMSNorm) or the first k values in row-major order (pRMSNorm). shape: the gain's."""

    def __init__(self, shape, n, k=None, eps=1e-5, bias=True, dims=1):
        super().__init__()
        self.k, self.n, self.eps, self.dims = k, n, eps, dims
        self.weight = nn.Parameter(torch.ones(shape))
        self.bias = nn.Parameter(torch.zeros(shape)) if bias else None

    def forward(self, x):
        f = x.flatten(-self.dims) if self.dims > 1 else x
        if self.k is not None and self.k < self.n:
            f = f[..., : self.k]
        ms = f.pow(2).mean(-1, keepdim=True)
        if self.dims > 1:
            ms = ms.unsqueeze(-1)
        y = x * torch.rsqrt(ms + self.eps) * self.weight
        return y + self.bias if self.bias is not None else y


def row_norm(kind, n, eps=1e-5, bias=True, p=0.0625):
    """The norm of a row of n values: layer, rms or prms (gain, and bias if `bias`)."""
    if kind == "layer":
        return nn.LayerNorm(n, eps=eps, elementwise_affine=True) if bias else _LNGain(n, eps)
    if kind == "rms":
        return RMSNorm(n, n, eps=eps, bias=bias)
    if kind == "prms":
        return RMSNorm(n, n, k=prms_k(n, p), eps=eps, bias=bias)
    raise ValueError(f"no row norm '{kind}'")


class _LNGain(nn.Module):
    """LayerNorm with a gain and no bias."""

    def __init__(self, n, eps):
        super().__init__()
        self.n, self.eps = n, eps
        self.weight = nn.Parameter(torch.ones(n))

    def forward(self, x):
        return nn.functional.layer_norm(x, (self.n,), self.weight, None, self.eps)


class StepBatchNorm(nn.Module):
    """Recurrent BatchNorm: one gain and bias, statistics per time step over the batch rows
    (running averages per step), as normbench's recurrent tasks."""

    def __init__(self, n, steps, eps=1e-5, gain=1.0, bias=True):
        super().__init__()
        self.eps = eps
        self.weight = nn.Parameter(torch.full((n,), gain))
        self.bias = nn.Parameter(torch.zeros(n)) if bias else None
        self.register_buffer("rm", torch.zeros(steps, n))
        self.register_buffer("rv", torch.ones(steps, n))

    def forward(self, x, t):
        t = min(t, self.rm.shape[0] - 1)
        return nn.functional.batch_norm(x, self.rm[t], self.rv[t], self.weight, self.bias,
                                        training=True, momentum=0.1, eps=self.eps)
