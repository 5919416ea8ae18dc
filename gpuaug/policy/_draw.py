"""Compose's device draws (``draws="device"``): the policy as a small program for one CUDA C
launch that draws every per-sample parameter and builds the fused stages' rows, and the
NumPy twin of its draws.

The program (:class:`DrawPlan`, made once per policy and input shape, dtype, channels and
layout, then cached) is a list of records of :data:`REC` int32s -- op, stream, value offset,
constant offset, row offset, argument -- over float64 constants. ``stream`` is the
transform's index in the policy: uniform ``j`` of the transform for sample ``s`` in call
``counter`` is :func:`gpuaug.random.philox_uniforms` ``(key, counter, [s], stream, j + 1)[0, j]``,
a function of (key, counter, s, transform, j) alone. The ops (kernels/fused_draw.cu):

====================  =============================================  =====================================
op                    draws (uniforms in order)                       values written (one row per sample)
====================  =============================================  =====================================
STAGE                 -- (copies the stage's constant row part)       --
G_CONST               -- (Resize, CenterCrop: a constant matrix)      --
G_FLIP                u0 < p                                          apply
G_ROT                 angle = lo + span u0                            angle
G_AFFINE              angle, [tx, ty], [scale], [shear_x, [shear_y]]  angle tx ty scale shear_x shear_y
G_RRC                 area u0..u9, log-ratio u10..u19, top, left      top left height width (boxes)
G_CROP                top u0, left u1                                 top left (corner)
G_PERSP               u0 < p, the 4 corners' x, y u1..u8              apply, corners (4 x (x, y))
G_END                 -- (inverse map, interpolation)                 --
C_JITTER              u0 < p, then each given range                   apply brightness contrast saturation hue
C_GRAY, C_SOLARIZE,   u0 < p                                          apply
C_POSTERIZE, C_INVERT
C_PERM                argsort(u0, u1, u2)                             permutation
C_GAMMA               u0 < p, gamma = (lo + span u1) / 100            apply gamma
A_BEGIN, A_END        -- (float semantics: a run of grayscale /        --
                      permutation steps as one 3x4 matrix)
====================  =============================================  =====================================

The drawn values have the meaning (and dict keys) of the transforms' host samplers, so
:func:`to_params` turns them into a :class:`~gpuaug.policy.compose.PolicyParams` that replays
through the host path; only the distributions' *streams* differ from the host draws
(gpuaug.random's Generator), not the distributions: the same ranges, probabilities, attempts
and roundings.

Supported: every geometric, colour and write transform, on uniform (not varshape) batches;
:func:`unsupported` says what is not (the op transforms: GaussianBlur, GaussianNoise,
RandomErasing, RandomEqualize, and the automatic policies).
"""
from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from gpuaug import random as R
from gpuaug.policy import transforms as TF

STAGE, G_CONST, G_FLIP, G_ROT, G_AFFINE, G_RRC, G_CROP, G_END, G_PERSP = 1, 2, 3, 4, 5, 6, 7, 8, 9
C_JITTER, C_GRAY, C_PERM, C_GAMMA, C_SOLARIZE, C_POSTERIZE, C_INVERT, A_BEGIN, A_END = range(10, 19)
REC = 6
ATTEMPTS = 10  # RandomResizedCrop's tries, as gpuaug.random.resized_crop_boxes
_RAD = 0.017453292519943295  # pi / 180, the kernel's constant

#: per transform type: the value keys, their widths and kinds ("b" bool, "i" int64, "f" float64,
#: "c" float64 (n, 4, 2) corners)
VALUES = {
    TF.RandomHorizontalFlip: (("apply", 1, "b"),), TF.RandomVerticalFlip: (("apply", 1, "b"),),
    TF.RandomRotation: (("angle", 1, "f"),),
    TF.RandomAffine: tuple((k, 1, "f") for k in ("angle", "tx", "ty", "scale", "shear_x", "shear_y")),
    TF.RandomResizedCrop: (("boxes", 4, "i"),), TF.RandomCrop: (("corner", 2, "i"),),
    TF.RandomPerspective: (("apply", 1, "b"), ("corners", 8, "c")),
    TF.Resize: (), TF.CenterCrop: (),
    TF.ColorJitter: (("apply", 1, "b"),) + tuple((k, 1, "f") for k in ("brightness", "contrast", "saturation", "hue")),
    TF.RandomGrayscale: (("apply", 1, "b"),), TF.RandomChannelPermutation: (("permutation", 3, "i"),),
    TF.RandomGamma: (("apply", 1, "b"), ("gamma", 1, "f")), TF.RandomSolarize: (("apply", 1, "b"),),
    TF.RandomPosterize: (("apply", 1, "b"),), TF.RandomInvert: (("apply", 1, "b"),),
    TF.Normalize: (), TF.ToDtype: (), TF.ToLayout: (),
}


def unsupported(transforms):
    """None when every transform can be drawn on the device, else a sentence saying which cannot."""
    bad = [type(t).__name__ for t in transforms if type(t) not in VALUES]
    if bad:
        return (f"transforms: {', '.join(sorted(set(bad)))} cannot be drawn on the device (supported: every "
                "geometric, colour and write transform)")
    return None


@dataclass
class StagePlan:
    """One fused stage of a device-drawn call: what launch_cuda needs, without per-call values."""

    spec: object            # the planner's StageSpec
    built: object           # a Built for one sample (codes, geo, border, output dtype / layout, jidx)
    col: int                # first column of the stage's rows in the call's (n, P) rows
    width: int              # its row length
    in_hw: tuple
    out_hw: tuple


@dataclass
class DrawPlan:
    """A policy's draw program for one input shape (see the module docstring)."""

    prog: np.ndarray        # (nrec, REC) int32
    consts: np.ndarray      # float64
    V: int                  # values per sample
    P: int                  # row floats per sample (all stages)
    keys: tuple             # per transform: ((key, offset, width, kind), ...)
    stages: tuple           # StagePlan per fused stage
    dev: dict               # device id -> (prog, consts) device arrays; ("launch", id(prog), n) -> launch args


def _span(lo, hi):
    return float(lo), float(np.float64(hi) - np.float64(lo))


def _affine_center(t, h, w):
    if t.center is None:
        return (w - 1) / 2, (h - 1) / 2
    return t.center[0] - 0.5, t.center[1] - 0.5


def compile_plan(transforms, items, dtype, channels, layout, hw):
    """The :class:`DrawPlan` of a policy (its transforms and planner ``items``, all fused) for
    input of ``dtype``, ``channels``, ``layout`` and image size ``hw``."""
    from gpuaug._batch import as_batch
    from gpuaug.ops._launch import float32_at_least
    from gpuaug.policy import _fused as F

    recs, consts = [], []
    keys, V = [], 0
    for t in transforms:
        ks = []
        for k, wd, kind in VALUES[type(t)]:
            ks.append((k, V, wd, kind))
            V += wd
        keys.append(tuple(ks))

    def rec(op, stream=0, c=(), roff=0, arg=0):
        voff = keys[stream][0][1] if keys[stream] else 0
        recs.append((op, stream, voff, len(consts), roff, arg))
        consts.extend(float(v) for v in c)

    stages, col = [], 0
    cur_hw, cur_dtype, cur_layout = tuple(int(v) for v in hw), dtype, layout
    rng = R.generator(0)
    for kind, spec in items:
        assert kind == "fused"
        # the stage's constant row part and output, from a one-sample host build
        shape = (1,) + (cur_hw + (channels,) if cur_layout == "NHWC" else (channels,) + cur_hw)
        b1 = as_batch(np.zeros(shape, cur_dtype), cur_layout)
        sizes = np.array([cur_hw], np.int64)
        tparams, s = [], sizes
        for t in transforms:
            tparams.append(t.sample(rng, 1, s))
            s = np.asarray(t.out_sizes(s), np.int64)
        built = F.build(spec, transforms, tparams, b1, cur_layout)
        width = built.rows.shape[1]
        rec(STAGE, c=built.rows[0], roff=col, arg=width)
        # geometry
        sz = cur_hw
        bilinear = False
        for i in spec.geometry:
            t = transforms[i]
            h, w = sz
            if isinstance(t, TF._Flip):
                rec(G_FLIP, i, (t.p, 0 if t.axis == 1 else 1, (w if t.axis == 1 else h) - 1.0))
            elif isinstance(t, TF.RandomRotation):
                rec(G_ROT, i, _span(*t.degrees) + _affine_center(t, h, w))
            elif isinstance(t, TF.RandomAffine):
                tr = t.translate is not None
                sc = t.scale is not None
                sh = t.shear or ()
                c = list(_span(*t.degrees)) + [float(tr), t.translate[0] * w if tr else 0.0,
                                                t.translate[1] * h if tr else 0.0, float(sc)]
                c += list(_span(*t.scale)) if sc else [0.0, 0.0]
                c += [float(len(sh))] + (list(_span(*sh[:2])) if sh else [0.0, 0.0])
                c += list(_span(*sh[2:4])) if len(sh) == 4 else [0.0, 0.0]
                c += list(_affine_center(t, h, w))
                rec(G_AFFINE, i, c)
            elif isinstance(t, TF.RandomResizedCrop):
                lo, hi = min(t.ratio), max(t.ratio)
                ratio = w / h
                fw = w if ratio < lo else (round(h * hi) if ratio > hi else w)
                fh = round(w / lo) if ratio < lo else h
                c = [h, w] + list(_span(*t.scale)) + list(_span(math.log(t.ratio[0]), math.log(t.ratio[1])))
                rec(G_RRC, i, c + [fh, fw, t.size[0], t.size[1], ATTEMPTS])
            elif isinstance(t, TF.RandomPerspective):
                bh = int(t.distortion_scale * (h // 2)) + 1
                bw = int(t.distortion_scale * (w // 2)) + 1
                rec(G_PERSP, i, (t.p, h, w, bh, bw))
            elif isinstance(t, TF.RandomCrop):
                pl, pt, pr, pb = (int(v[0]) for v in t._pads(np.array([sz], np.int64)))
                if h + pt + pb < t.size[0] or w + pl + pr < t.size[1]:
                    raise ValueError(f"size: got {t.size}; an image (padded) is smaller, e.g. {sz}; "
                                     "pass pad_if_needed=True or a smaller size")
                rec(G_CROP, i, (-pt, h + pb - t.size[0] + 1 + pt, -pl, w + pr - t.size[1] + 1 + pl))
            else:  # Resize, CenterCrop: no draws
                rec(G_CONST, i, t.matrices({}, np.array([sz], np.int64))[0].reshape(9))
            bilinear |= t.interpolation == "bilinear"
            sz = tuple(int(v) for v in np.asarray(t.out_sizes(np.array([sz], np.int64)))[0])
        if spec.geometry:
            rec(G_END, roff=col, arg=int(bilinear))
        # colour, in colour_program's order (float semantics: runs of grayscale / permutation
        # steps multiplied into one 3x4 matrix)
        off = col + F.P_COLOUR
        merge = spec.sem != "uint8"
        run = False
        for i in spec.colour:
            t = transforms[i]
            lin = isinstance(t, (TF.RandomGrayscale, TF.RandomChannelPermutation))
            if run and not lin:
                rec(A_END, roff=off)
                off += 12
                run = False
            if merge and lin and not run:
                rec(A_BEGIN)
                run = True
            if isinstance(t, TF.ColorJitter):
                c = [t.p]
                for r in (t.brightness, t.contrast_range, t.saturation, t.hue):
                    c += list(_span(*r)) + [1.0] if r is not None else [0.0, 0.0, 0.0]
                rec(C_JITTER, i, c, off)
                off += 4
            elif isinstance(t, TF.RandomGrayscale):
                rec(C_GRAY, i, (t.p,) + TF.GRAY_WEIGHTS, off, int(merge))
                off += 0 if merge else 1
            elif isinstance(t, TF.RandomChannelPermutation):
                rec(C_PERM, i, (), off, int(merge))
                off += 0 if merge else 12
            elif isinstance(t, TF.RandomGamma):
                rec(C_GAMMA, i, (t.p,) + _span(*t.gamma_limit), off)
                off += 2
            elif isinstance(t, TF.RandomSolarize):
                rec(C_SOLARIZE, i, (t.p, float(float32_at_least(np.asarray(t.threshold, np.float64)))), off)
                off += 1
            elif isinstance(t, TF.RandomPosterize):
                rec(C_POSTERIZE, i, (t.p, float(t.bits)), off)
                off += 1
            elif isinstance(t, TF.RandomInvert):
                rec(C_INVERT, i, (t.p,), off)
                off += 1
        if run:
            rec(A_END, roff=off)
            off += 12
        if off != col + width:
            raise AssertionError(f"device draw plan: colour rows end at {off - col}, the host's at {width}")
        out_hw = tuple(built.shapes[0])
        stages.append(StagePlan(spec, built, col, width, cur_hw, out_hw))
        col += width
        cur_hw, cur_dtype, cur_layout = out_hw, built.out_dtype, built.out_layout
    return DrawPlan(np.asarray(recs, np.int32).reshape(-1, REC), np.asarray(consts + [0.0], np.float64),
                    max(V, 1), col, tuple(keys), tuple(stages), {})


# ------------------------------------------------------------------------------ NumPy twin
def twin_values(plan: DrawPlan, key, counter, samples):
    """The values the device draw writes for ``samples`` (an int n: samples 0..n-1, or indices),
    computed with NumPy: ``(len(samples), V)`` float64, bit for bit the kernel's (the one
    transcendental among the drawn values, RandomResizedCrop's exp, is rounded to whole pixels)."""
    s = np.arange(samples) if np.ndim(samples) == 0 else np.asarray(samples)
    n = len(s)
    out = np.zeros((n, plan.V))
    c = plan.consts
    for op, stream, voff, coff, _, _ in plan.prog.tolist():
        def u(count):
            return R.philox_uniforms(key, counter, s, stream, count)

        k = c[coff:coff + 16]
        v = out[:, voff:]
        if op == G_FLIP or op in (C_GRAY, C_SOLARIZE, C_POSTERIZE, C_INVERT):
            v[:, 0] = u(1)[:, 0] < k[0]
        elif op == G_ROT:
            v[:, 0] = k[0] + k[1] * u(1)[:, 0]
        elif op == G_AFFINE:
            cnt = 1 + 2 * (k[2] != 0) + (k[5] != 0) + int(k[8]) // 2
            uu = iter(u(cnt).T)
            v[:, 0] = k[0] + k[1] * next(uu)
            v[:, 1:6] = [0.0, 0.0, 1.0, 0.0, 0.0]
            if k[2] != 0:
                v[:, 1] = np.rint(k[3] * (2.0 * next(uu) - 1.0))
                v[:, 2] = np.rint(k[4] * (2.0 * next(uu) - 1.0))
            if k[5] != 0:
                v[:, 3] = k[6] + k[7] * next(uu)
            if k[8] >= 2:
                v[:, 4] = k[9] + k[10] * next(uu)
            if k[8] >= 4:
                v[:, 5] = k[11] + k[12] * next(uu)
        elif op == G_RRC:
            hh, ww, att = k[0], k[1], int(k[10])
            uu = u(2 * att + 2)
            area = (hh * ww) * (k[2] + k[3] * uu[:, :att])
            ar = np.exp(k[4] + k[5] * uu[:, att:2 * att])
            w = np.rint(np.sqrt(area * ar))
            h = np.rint(np.sqrt(area / ar))
            ok = (w > 0) & (w <= ww) & (h > 0) & (h <= hh)
            first = np.argmax(ok, axis=1)
            found = ok[np.arange(n), first]
            bh = np.where(found, h[np.arange(n), first], k[6])
            bw = np.where(found, w[np.arange(n), first], k[7])
            st, sl = hh - bh + 1.0, ww - bw + 1.0
            top = np.where(found, np.minimum(np.floor(uu[:, 2 * att] * st), st - 1.0), np.floor((hh - bh) / 2.0))
            left = np.where(found, np.minimum(np.floor(uu[:, 2 * att + 1] * sl), sl - 1.0), np.floor((ww - bw) / 2.0))
            v[:, 0], v[:, 1], v[:, 2], v[:, 3] = top, left, bh, bw
        elif op == G_CROP:
            uu = u(2)
            v[:, 0] = k[0] + np.minimum(np.floor(uu[:, 0] * k[1]), k[1] - 1.0)
            v[:, 1] = k[2] + np.minimum(np.floor(uu[:, 1] * k[3]), k[3] - 1.0)
        elif op == C_JITTER:
            given = [k[3 + 3 * q] != 0 for q in range(4)]
            uu = iter(u(1 + sum(given)).T)
            on = next(uu) < k[0]
            v[:, 0] = on
            for q in range(4):
                neutral = 0.0 if q == 3 else 1.0
                if given[q]:
                    x = k[1 + 3 * q] + k[2 + 3 * q] * next(uu)
                    v[:, 1 + q] = x if k[0] == 1.0 else np.where(on, x, neutral)
                else:
                    v[:, 1 + q] = neutral
        elif op == G_PERSP:
            uu = u(9)
            v[:, 0] = uu[:, 0] < k[0]
            hh, ww, bh, bw = k[1], k[2], k[3], k[4]
            lo = [0.0, 0.0, ww - bw, 0.0, ww - bw, hh - bh, 0.0, hh - bh]
            for q in range(8):
                span = bh if q & 1 else bw
                v[:, 1 + q] = lo[q] + np.minimum(np.floor(uu[:, 1 + q] * span), span - 1.0)
        elif op == C_PERM:
            v[:, 0:3] = np.argsort(u(3), axis=1, kind="stable")
        elif op == C_GAMMA:
            uu = u(2)
            on = uu[:, 0] < k[0]
            v[:, 0] = on
            v[:, 1] = np.where(on, (k[1] + k[2] * uu[:, 1]) / 100.0, 1.0)
    return out


def to_params(plan: DrawPlan, values, sizes):
    """The per-transform dicts of host arrays (the host samplers' keys and dtypes) from drawn
    ``values`` ((n, V)): what :class:`~gpuaug.policy.compose.PolicyParams` holds."""
    out = []
    for ks in plan.keys:
        d = {}
        for k, off, wd, kind in ks:
            a = values[:, off:off + wd]
            if wd == 1:
                a = a[:, 0]
            d[k] = (a != 0 if kind == "b" else a.astype(np.int64) if kind == "i" else
                    np.array(a).reshape(-1, 4, 2) if kind == "c" else np.array(a))
        out.append(d)
    return tuple(out)


# ------------------------------------------------------------------------------ launch
def device_program(plan: DrawPlan):
    """(prog, consts) on the current device, uploaded once per plan and device."""
    import cupy as cp

    dev = cp.cuda.runtime.getDevice()
    got = plan.dev.get(dev)
    if got is None:
        got = plan.dev[dev] = (cp.asarray(plan.prog), cp.asarray(plan.consts))
    return got


def draw_grid(n):
    """(blocks, threads) of the draw launch: one thread per sample, blocks of up to 256 threads,
    at most 256 blocks (a grid stride beyond)."""
    threads = min(256, max(32, (n + 31) // 32 * 32))
    return min(256, max(1, -(-n // threads))), threads


def draw_launcher(plan: DrawPlan, n):
    """What the draw launch of ``n`` samples needs besides the call's key, counter and buffers:
    (kernel, grid, block, program, #records, constants, n, V, P), kept in ``plan.dev`` per
    device (its uploaded program) and batch size."""
    prog, cst = device_program(plan)
    ck = ("launch", id(prog), n)
    got = plan.dev.get(ck)
    if got is None:
        from gpuaug.kernels._cuda import get_function

        if len(plan.dev) >= 64:  # many batch sizes: drop the launch entries, keep the programs
            for k in [k for k in plan.dev if isinstance(k, tuple)]:
                del plan.dev[k]
        blocks, threads = draw_grid(n)
        got = plan.dev[ck] = (get_function("fused_draw.cu", "gpuaug_policy_draw"), (blocks, 1, 1), (threads, 1, 1),
                              prog, np.int32(len(plan.prog)), cst, np.int32(n), np.int32(plan.V), np.int32(plan.P))
    return got


def launch_draw(plan: DrawPlan, n, key, counter, values, rows, counter_dev=None, launcher=None):
    """The draw launch on CuPy's current stream: ``values`` (n, V) float64 and ``rows`` (n, P)
    float32 on the device (arrays, or addresses as ints); the call counter ``counter``, or
    ``counter_dev`` (a device uint64 pair: the counter, advanced by the launch, and 0).
    ``launcher``: :func:`draw_launcher`'s tuple when the caller has it."""
    fn, grid, block, prog, nrec, cst, nn, vv, pp = launcher or draw_launcher(plan, n)
    fn(grid, block, (prog, nrec, cst, nn, np.uint32(key[0]), np.uint32(key[1]), np.uint64(counter), counter_dev,
                     values, vv, rows, pp))
