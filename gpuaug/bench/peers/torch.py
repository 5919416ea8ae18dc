"""Plain PyTorch peers, where torchvision has no such op."""
from __future__ import annotations

import numpy as np

from ._common import (ONE_PER_BATCH, Unsupported, _cmn_window, _import, _mean_std, _t, cycle, f0, i0, peer,
                      per_sample, s0)


@peer("rot90", "torch")
def _torch_rot90(batch, kw):
    torch = _import("torch", "torch")
    k = i0(kw.get("k", 1))
    return cycle(batch.torch(), lambda x: torch.rot90(x, k, dims=(-2, -1)).contiguous(),
                 variant="torch.rot90().contiguous()", note=ONE_PER_BATCH)


@peer("transpose", "torch")
def _torch_transpose(batch, kw):
    _import("torch", "torch")
    return cycle(batch.torch(), lambda x: x.transpose(-1, -2).contiguous(), variant="x.transpose().contiguous()")


@peer("color_twist", "torch")
def _torch_color_twist(batch, kw):
    torch = _import("torch", "torch")
    if batch.c != 3:
        raise Unsupported("a 3x4 colour matrix needs 3 channels")
    m = _t(batch, per_sample(kw["matrix"], batch.n, shape=(3, 4)))
    a, off = m[:, :, :3], m[:, :, 3, None, None]
    u8 = batch.dtype == np.uint8

    def run(x):
        y = torch.einsum("nchw,ndc->ndhw", x.float(), a) + off
        return y.round_().clamp_(0, 255).to(torch.uint8) if u8 else y.to(x.dtype)

    return cycle(batch.torch(), run, variant="einsum + round + cast", note="eager PyTorch; per-sample matrices")


@peer("crop_mirror_normalize", "torch")
def _torch_cmn(batch, kw):
    _import("torch", "torch")
    h, w, py, px = _cmn_window(kw, batch)
    t, le = int(round(py[0] * (batch.h - h))), int(round(px[0] * (batch.w - w)))
    mirror = bool(s0(kw.get("mirror", False)))
    mean, std = _mean_std(kw, batch.c)
    m = _t(batch, np.asarray(mean).reshape(1, -1, 1, 1))
    s = _t(batch, np.asarray(std).reshape(1, -1, 1, 1))

    def run(x):
        y = x[:, :, t:t + h, le:le + w]
        if mirror:
            y = y.flip(-1)
        return (y.float() - m) / s

    return cycle(batch.torch(), run, variant="slice, flip, (x - mean) / std", note=f"eager PyTorch; {ONE_PER_BATCH}")


@peer("salt_and_pepper", "torch")
def _torch_salt_and_pepper(batch, kw):
    torch = _import("torch", "torch")
    p, sv = f0(kw.get("prob", 0.05)), f0(kw.get("salt_vs_pepper", 0.5))
    top = batch.maxval

    xs = batch.torch()
    salt = torch.tensor(top, dtype=xs[0].dtype, device=xs[0].device)
    pepper = torch.zeros((), dtype=xs[0].dtype, device=xs[0].device)

    def run(x):
        r = torch.rand((x.shape[0], 1) + tuple(x.shape[2:]), device=x.device)
        y = torch.where(r < p * sv, salt, x)
        return torch.where((r >= p * sv) & (r < p), pepper, y)

    return cycle(xs, run, variant="torch.rand + 2 x torch.where", note=f"eager PyTorch; {ONE_PER_BATCH}")
