"""gpuaug_target_masks pixels per thread on the GPU: the mask warp of a policy stage (nearest,
256 x 224 x 224 uint8 label maps; the maps of the targets bench's policy, flip + affine + RRC, or
with SYNTHETIC=1 RandomResizedCrop-like magnification, rotation +-15 deg about the corner, flips) with kernels/targets.cu compiled at several GPUAUG_MASK_PX (pixels per thread),
and the previous row-linear mapping (git HEAD~ source given as OLD_SRC env, optional).
Every variant's output must equal PX=16's (the default) bit for bit; median of CUDA event times.

    python3 tests/gpu/mask_tiles.py
"""
import os
import sys

import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", ".."))
import cupy as cp  # noqa: E402

from gpuaug.kernels._cuda import NVRTC_OPTIONS, source  # noqa: E402
from gpuaug.targets._apply import mask_blocks  # noqa: E402


def maps(n, s, rng):
    area = rng.uniform(0.08, 1.0, n)
    ratio = np.exp(rng.uniform(np.log(3 / 4), np.log(4 / 3), n))
    cw, ch = np.sqrt(area * ratio) * s, np.sqrt(area / ratio) * s
    cw, ch = np.minimum(cw, s), np.minimum(ch, s)
    th = np.deg2rad(rng.uniform(-15, 15, n))
    flip = np.where(rng.random(n) < 0.5, -1.0, 1.0)
    sx, sy = cw / s * flip, ch / s
    c, si = np.cos(th), np.sin(th)
    a = np.zeros((n, 9), np.float32)
    a[:, 0], a[:, 1] = c * sx, -si * sy
    a[:, 3], a[:, 4] = si * sx, c * sy
    x0 = rng.uniform(0, s - cw)
    a[:, 2] = x0 + np.where(flip < 0, cw, 0)
    a[:, 5] = rng.uniform(0, s - ch)
    a[:, 8] = 1
    return a


def policy_maps(masks, s):
    """The maps gpuaug_target_all gets from Compose(flip, RandomAffine(15, 0.1, 0.9-1.1), RRC(s))."""
    import gpuaug
    from gpuaug.targets import Masks
    from gpuaug.targets import _apply as TA

    got = []
    real = TA._DeviceMasks.__init__

    def spy(self, m, inv, out_hw, constant):
        got.append(np.asarray(inv, np.float32).reshape(-1, 9))
        real(self, m, inv, out_hw, constant)

    TA._DeviceMasks.__init__ = spy
    try:
        pol = gpuaug.Compose([gpuaug.RandomHorizontalFlip(),
                              gpuaug.RandomAffine(15, translate=(0.1, 0.1), scale=(0.9, 1.1)),
                              gpuaug.RandomResizedCrop(s)], seed=0)
        x = cp.zeros(masks.shape + (3,), cp.uint8)
        pol(x, masks=Masks(masks))
    finally:
        TA._DeviceMasks.__init__ = real
    assert len(got) == 1, got
    return got[0]


def run(fn, blocks, args, iters=50):
    for _ in range(5):
        fn((blocks,), (256,), args)
    e0, e1 = cp.cuda.Event(), cp.cuda.Event()
    ts = []
    for _ in range(iters):
        e0.record()
        fn((blocks,), (256,), args)
        e1.record()
        e1.synchronize()
        ts.append(cp.cuda.get_elapsed_time(e0, e1) * 1e3)
    return float(np.median(ts))


def main():
    n, s = 256, 224
    rng = np.random.default_rng(0)
    src = cp.asarray(rng.integers(0, 21, (n, s, s), dtype=np.uint8))
    inv = cp.asarray(maps(n, s, rng) if os.environ.get("SYNTHETIC") else policy_maps(src, s))
    name = "gpuaug_target_masks<unsigned char, false>"
    flush = cp.empty(256 << 20, cp.uint8)
    ref = None
    print(f"# {cp.cuda.runtime.getDeviceProperties(0)['name'].decode()}: {n} x {s} x {s} uint8 masks, us per launch")
    variants = [(tq, source("targets.cu")) for tq in (16, 4, 8, 32)]
    old = os.environ.get("OLD_SRC")
    if old:
        variants.append(("old linear", open(old).read()))
    for tq, code in variants:
        opts = NVRTC_OPTIONS + ((f"-DGPUAUG_MASK_PX={tq}",) if isinstance(tq, int) else ())
        mod = cp.RawModule(code=code, options=opts, name_expressions=[name])
        fn = mod.get_function(name)
        blocks = mask_blocks(n, s, s, tq) if isinstance(tq, int) else -(-(n * s * (s // 4)) // 256)
        dst = cp.full((n, s, s), 7, cp.uint8)
        args = (src, dst, inv, np.int32(n), np.int32(1), np.int32(s), np.int32(s), np.int32(s), np.int32(s),
                np.int32(0), np.int32(1))
        t_hot = run(fn, blocks, args)
        ts = []
        for _ in range(15):
            flush.fill(1)
            e0, e1 = cp.cuda.Event(), cp.cuda.Event()
            e0.record()
            fn((blocks,), (256,), args)
            e1.record()
            e1.synchronize()
            ts.append(cp.cuda.get_elapsed_time(e0, e1) * 1e3)
        if ref is None and tq == 16:
            ref = dst.copy()
        same = "" if ref is None else ("= PX 16" if bool((dst == ref).all()) else "DIFFERS from PX 16")
        print(f"PX {tq!s:>10}: {t_hot:7.1f} us (L2 warm)  {np.median(ts):7.1f} us (after a 256 MiB flush)  {same}")
    assert ref is not None


if __name__ == "__main__":
    main()
