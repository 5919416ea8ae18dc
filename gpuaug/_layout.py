"""Batch layouts that more than one family of ops reads, in one place.

- :func:`packed_layout`: whether colour.cuh's packed HWC fast path can run on a pair of
  descriptor tables (the colour ops, and the fused policy's contrast reduction);
- :func:`uniform_out` / :func:`chw_list_out`: the output of a varshape input whose images all
  have one size (a crop), or are CHW (the intensity ops' crop_mirror_normalize, and the fused
  policy's write stage).

``gpuaug.ops._colour``, ``gpuaug.ops._intensity``'s ops and ``gpuaug.policy._fused`` import
them from here (internal API: not part of ``gpuaug``'s public names).
"""
from __future__ import annotations

import dataclasses

import numpy as np

from gpuaug._batch import _describe


# -- the packed HWC fast path (colour.cuh) ------------------------------------------------
def _packed(tab, c):
    """Per sample: packed HWC (pixel stride c, channel stride 1, row stride w * c)."""
    return (tab[:, 5] == 1) & (tab[:, 4] == c) & ((tab[:, 3] == tab[:, 2] * c) | (tab[:, 1] == 1))


def packed_layout(src_t, dst_t, ci, co, esize):
    """(ok, items): whether packed_map can run, and its largest per-sample work-item count.

    Mirrors colour.cuh's packed_head: a pixel k < 16 at which both src and dst are 16-byte
    aligned must exist for every sample.
    """
    g = 16 // esize
    ok = _packed(src_t, ci)
    if dst_t is not None:
        ok &= _packed(dst_t, co)
    if not ok.all():
        return False, 0
    k = np.arange(16, dtype=np.int64)
    hit = (src_t[:, 0, None] + k * ci * esize) % 16 == 0
    if dst_t is not None:
        hit &= (dst_t[:, 0, None] + k * co * esize) % 16 == 0
    if not hit.any(axis=1).all():
        return False, 0
    head = hit.argmax(axis=1)
    hw = src_t[:, 1] * src_t[:, 2]
    ng = np.where(hw > head, (hw - head) // g, 0)
    return True, int((hw - ng * (g - 1)).max())


# -- outputs of varshape batches ----------------------------------------------------------
def uniform_out(b, out, hw, dtype, channels, layout):
    """A varshape input whose output has one size (a crop): allocate, or check the
    caller's ``out=``, as one 4-D batch in ``layout``. Returns ``(result, views)``: pass
    ``views`` (one HWC view per sample) to run() as ``out=`` and return ``result``."""
    proxy = dataclasses.replace(b, varshape=False, single=False)
    result, dst = proxy.alloc(out, b.uniform(hw), dtype=dtype, channels=channels, layout=layout)
    return result, [dst.nhwc[i] for i in range(b.n)]


def chw_list_out(b, out, shapes, dtype, channels):
    """A varshape input with CHW output images: ``(result list, HWC views for run())``."""
    xp = b.xp
    if out is None:
        result = [xp.empty((channels, h, w), dtype) for h, w in shapes]
    else:
        if not isinstance(out, (list, tuple)) or len(out) != len(shapes):
            raise ValueError(f"out: a varshape batch needs a list of {len(shapes)} arrays; got {_describe(out)}")
        # the same checks as every out= (shape, dtype, device, read-only, overlap with the input)
        result = [b._check_out(o, (channels, h, w), np.dtype(dtype), f"out[{i}]", layout="CHW")
                  for i, (o, (h, w)) in enumerate(zip(out, shapes))]
    return result, [r.transpose(1, 2, 0) for r in result]
