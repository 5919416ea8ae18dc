"""The automatic policies' and MixUp/CutMix's host-side draws and parameter rows as they were
before the host-cost work of issue 13 (gpuaug/policy/auto.py and mixing.py at 7493088), kept
verbatim as the reference that the fast paths must match bit for bit (same draws from the same
generator state, same (K, N, 9) float32 rows, same records).

Each ``*_draw`` takes the policy object (for its settings), a Generator and (n, h, w) and
returns what the policy's ``_draw`` returned then."""
from __future__ import annotations

import numpy as np

from gpuaug.policy.auto import _AA, _linspace, _posterize_bits, _space, OP_NAMES, AutoParams

_GEOMETRIC = (1, 2, 3, 4, 5)
_P = 9
_F32 = np.float32


def dense(space):
    nb = max([len(t) for t, _ in space.values() if t is not None] + [1])
    table = np.zeros((len(OP_NAMES), nb))
    signed = np.zeros(len(OP_NAMES), bool)
    size = np.ones(len(OP_NAMES), np.int64)
    for op, (t, sg) in space.items():
        if t is not None:
            table[op, :len(t)] = t.astype(np.float64)
            size[op] = len(t)
        signed[op] = sg
    return table, signed, size


def magnitudes(space, ops, bins, flip):
    table, signed, size = dense(space)
    m = table[ops, np.minimum(np.maximum(bins, 0), size[ops] - 1)]
    return np.where(flip & signed[ops], -m, m)


def inverse_affine(center, angle, translate, shear):
    rot = np.radians(angle)
    sx, sy = np.radians(shear[0]), np.radians(shear[1])
    cx, cy = center
    tx, ty = translate
    a = np.cos(rot - sy) / np.cos(sy)
    b = -np.cos(rot - sy) * np.tan(sx) / np.cos(sy) - np.sin(rot)
    c = np.sin(rot - sy) / np.cos(sy)
    d = -np.sin(rot - sy) * np.tan(sx) / np.cos(sy) + np.cos(rot)
    m = np.stack([d, -b, np.zeros_like(a), -c, a, np.zeros_like(a)], axis=-1)
    m[:, 2] += m[:, 0] * (-cx - tx) + m[:, 1] * (-cy - ty)
    m[:, 5] += m[:, 3] * (-cx - tx) + m[:, 4] * (-cy - ty)
    m[:, 2] += cx
    m[:, 5] += cy
    return m


def step_rows(ops, mags, h, w, bilinear=False):
    ops = np.asarray(ops, np.int64)
    mags = np.asarray(mags, np.float64)
    n = ops.shape[0]
    rows = np.zeros((n, _P), _F32)
    rows[:, 0] = ops
    geo = np.isin(ops, _GEOMETRIC)
    if geo.any():
        o, m = ops[geo], mags[geo]
        z = np.zeros_like(m)
        shear_deg = np.degrees(np.arctan(m))
        sxd = np.where(o == 1, shear_deg, 0.0)
        syd = np.where(o == 2, shear_deg, 0.0)
        tx = np.where(o == 3, np.trunc(m), 0.0)
        ty = np.where(o == 4, np.trunc(m), 0.0)
        angle = np.where(o == 5, -m, 0.0)
        shear_c = (o == 1) | (o == 2)
        cx = np.where(shear_c, -w * 0.5, 0.0)
        cy = np.where(shear_c, -h * 0.5, 0.0)
        mat = inverse_affine((cx, cy), angle + z, (tx, ty), (sxd, syd)).astype(_F32)
        scale = np.array([0.5 * w] * 3 + [0.5 * h] * 3, _F32)
        rows[geo, 1:7] = mat / scale
        rows[geo, 7] = 1.0 if bilinear else 0.0
    ratio = 1.0 + mags
    for op in (6, 7, 8):
        sel = ops == op
        rows[sel, 7] = ratio[sel].astype(_F32)
        rows[sel, 8] = (1.0 - ratio[sel]).astype(_F32)
    sel = ops == 9
    rows[sel, 8] = (1.0 - ratio[sel]).astype(_F32)
    sel = ops == 10
    bits = np.clip(np.trunc(mags[sel]).astype(np.int64), 0, 8)
    rows[sel, 7] = (((1 << bits) - 1) << (8 - bits)) & 0xFF
    sel = ops == 11
    rows[sel, 7] = mags[sel].astype(_F32)
    return rows


def all_rows(params, h, w, bilinear):
    """apply_ops' (K, N, 9) rows of an AutoParams."""
    ops, mags = np.asarray(params.ops), np.asarray(params.magnitudes, np.float64)
    n, k = ops.shape
    return step_rows(ops.T.ravel(), mags.T.ravel(), h, w, bilinear).reshape(k, n, _P)


def rand_augment_draw(pol, rng, n, h, w):
    space = _space("rand", pol.num_magnitude_bins, h, w)
    ops = rng.integers(0, len(space), (n, pol.num_ops))
    flip = rng.integers(0, 2, (n, pol.num_ops)) == 1
    mags = magnitudes(space, ops, np.full(ops.shape, pol.magnitude), flip)
    return AutoParams(ops, mags)


def trivial_augment_draw(pol, rng, n, h, w):
    space = _space("trivial", pol.num_magnitude_bins, h, w)
    ops = rng.integers(0, len(space), (n, 1))
    bins = rng.integers(0, pol.num_magnitude_bins, (n, 1))
    flip = rng.integers(0, 2, (n, 1)) == 1
    return AutoParams(ops, magnitudes(space, ops, bins, flip), {"bins": bins})


def auto_augment_draw(pol, rng, n, h, w):
    table = _AA[pol.policy]
    p_ops = np.array([[OP_NAMES.index(o) for o, _, _ in sp] for sp in table])
    p_probs = np.array([[p for _, p, _ in sp] for sp in table])
    p_bins = np.array([[-1 if m is None else m for _, _, m in sp] for sp in table])
    space = _space("auto", 10, h, w)
    pid = rng.integers(0, len(p_ops), n)
    probs = rng.random((n, 2))
    signs = rng.integers(0, 2, (n, 2))
    ops = p_ops[pid]
    mags = magnitudes(space, ops, np.maximum(p_bins[pid], 0), signs == 0)
    applied = probs <= p_probs[pid]
    ops = np.where(applied, ops, 0)
    mags = np.where(applied, mags, 0.0)
    return AutoParams(ops, mags, {"policy_ids": pid, "probs": probs})


def augmix_space(num_bins, h, w, all_ops):
    sp = {1: (_linspace(0.0, 0.3, num_bins), True), 2: (_linspace(0.0, 0.3, num_bins), True),
          3: (_linspace(0.0, w / 3.0, num_bins), True), 4: (_linspace(0.0, h / 3.0, num_bins), True),
          5: (_linspace(0.0, 30.0, num_bins), True), 10: (_posterize_bits(num_bins, 4, top=4), False),
          11: (_linspace(255.0, 0.0, num_bins), False), 12: (None, False), 13: (None, False)}
    if all_ops:
        sp.update({k: (_linspace(0.0, 0.9, num_bins), True) for k in (6, 7, 8, 9)})
    return sp


def augmix_draw(pol, rng, n, h, w):
    space = augmix_space(10, h, w, pol.all_ops)
    ids = np.array(list(space))
    k, d = pol.mixture_width, pol._depth
    m = rng.dirichlet([pol.alpha] * 2, n) if n else np.zeros((0, 2))
    cw = (rng.dirichlet([pol.alpha] * k, n) if n else np.zeros((0, k))) * m[:, 1:2]
    depth = np.full((n, k), d) if pol.chain_depth > 0 else rng.integers(1, 4, (n, k))
    ops = ids[rng.integers(0, len(ids), (n, k, d))]
    bins = rng.integers(0, pol.severity, (n, k, d))
    flip = rng.integers(0, 2, (n, k, d)) == 1
    mags = magnitudes(space, ops, bins, flip)
    used = np.arange(d)[None, None, :] < depth[..., None]
    ops, mags = np.where(used, ops, 0), np.where(used, mags, 0.0)
    weights = np.concatenate([m[:, :1], cw], axis=1)
    return AutoParams(ops.reshape(n, k * d), mags.reshape(n, k * d), {"weights": weights, "depth": depth})


# -- MixUp / CutMix ---------------------------------------------------------------------------

def cycle(rng, n):
    order = rng.permutation(n)
    partner = np.empty_like(order)
    partner[order[:-1]] = order[1:]
    if n:
        partner[order[-1]] = order[0]
    return order, partner


def beta(rng, alpha, n):
    return rng.random(n) if alpha == 1.0 else rng.beta(alpha, alpha, n)


def mixup_draw(mix, rng, n, h, w):
    """(partner, lam, boxes, order)"""
    order, partner = cycle(rng, n)
    return partner, beta(rng, mix.alpha, n), None, order


def cutmix_draw(mix, rng, n, h, w):
    order, partner = cycle(rng, n)
    lam = beta(rng, mix.alpha, n)
    size = np.array([[h], [w]])
    centre = (rng.random((2, n))[::-1] * size).astype(np.int64)
    half = (0.5 * np.sqrt(1.0 - lam) * size).astype(np.int64)
    box = np.empty((4, n), np.int64)
    np.maximum(np.subtract(centre, half, out=box[:2]), 0, out=box[:2])
    np.minimum(np.add(centre, half, out=box[2:]), size, out=box[2:])
    side = box[2:] - box[:2]
    lam_adj = 1.0 - side[0] * side[1] / float(h * w)
    return partner, lam_adj, box.T, order


def records(partner, lam, boxes, order):
    n = len(partner)
    rec = np.zeros((n, 8), np.int32)
    rec[:, 0] = partner
    rec[:, 1] = np.asarray(lam, np.float32).view(np.int32)
    if boxes is not None:
        rec[:, 2:6] = boxes
    rec[:, 6] = np.arange(n) if order is None else order
    return rec
