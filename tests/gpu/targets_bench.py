"""Bench: images alone vs images + boxes + keypoints + masks through one gpuaug.Compose policy
(RandomHorizontalFlip + RandomAffine + RandomResizedCrop, per-sample parameters), and kornia's
AugmentationSequential with data_keys=["input", "mask", "bbox_xyxy", "keypoints"] when kornia
is importable.

    OUT=dir python3 tests/gpu/targets_bench.py [--n 256] [--size 224] [--boxes 50] [--kp 17]
        [--iters 50] [--warmup 10]

Batch: N x size x size x 3 uint8 NHWC on the GPU, `--boxes` boxes (padded (N, M, 4) float32
xyxy), `--kp` keypoints ((N, K, 2) float32) and one (N, size, size) uint8 label map per image.

Numbers per row (gpuaug.bench.GpuClock, the op bench's clock):
- device ms: CUDA events around each call, calls queued behind a spin kernel so the host runs
  ahead and the events time only the GPU's work (median of `--iters`);
- host ms: host time per call while queueing;
- loop ms: back-to-back calls, one sync at the end, divided by the count (what a Python
  training loop sees: the slower of host and device).
The issue's targets: images+targets <= 1.3 x images alone (device ms), >= 10 x faster than
kornia with the same data_keys. Prints a table; writes $OUT/targets_bench.json when OUT is set.

Where the targets' device time goes (rows after the main ones):
- "one launch": the default on the GPU since session 6: a stage's boxes, keypoints and masks
  in one upload and one launch (gpuaug_target_all; masks 16 pixels a thread, 16-byte stores);
- "two launches (before)": the earlier path, forced for comparison: map_targets (upload +
  gpuaug_target_both) then the masks through gpuaug.warp_affine (its own upload + launch,
  8 x 4 pixel warp tiles writing uint8 planes a byte per lane);
- "no fork": the targets' launch on the call's stream after the images' kernel (the default
  before session 9; the default now forks a side stream before the images' kernel, so the
  targets run beside it); "high priority": the side stream at the device's highest priority;
- "targets alone": PolicyTargets.run on the call's last_params (no image pass), both paths;
- SSD: RandomIoUCrop(300) + RandomHorizontalFlip with boxes: sample_policy (the device
  selection kernel and its readback) and the policy call.
Boxes are passed with check=False (no per-call NaN check and its synchronisation), as a
training loop would after checking a dataset once.
"""
import argparse
import json
import os
import sys

import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", ".."))

import cupy as cp  # noqa: E402

import gpuaug  # noqa: E402
from gpuaug.targets import Boxes, Keypoints, Masks  # noqa: E402
from _timing import torch_event_ms  # noqa: E402 - tests/gpu/_timing.py


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--n", type=int, default=256)
    ap.add_argument("--size", type=int, default=224)
    ap.add_argument("--boxes", type=int, default=50)
    ap.add_argument("--kp", type=int, default=17)
    ap.add_argument("--iters", type=int, default=50)
    ap.add_argument("--warmup", type=int, default=10)
    args = ap.parse_args()
    n, s, m, k = args.n, args.size, args.boxes, args.kp
    rng = np.random.default_rng(0)
    x = cp.asarray(rng.integers(0, 256, (n, s, s, 3), dtype=np.uint8))
    x1 = rng.uniform(0, s * 0.8, (n, m))
    y1 = rng.uniform(0, s * 0.8, (n, m))
    b = np.stack([x1, y1, x1 + rng.uniform(4, s * 0.2, (n, m)), y1 + rng.uniform(4, s * 0.2, (n, m))], -1)
    boxes = cp.asarray(b.astype(np.float32))
    pts = cp.asarray(rng.uniform(0, s - 1, (n, k, 2)).astype(np.float32))
    masks = cp.asarray(rng.integers(0, 21, (n, s, s), dtype=np.uint8))
    pol = gpuaug.Compose([gpuaug.RandomHorizontalFlip(),
                          gpuaug.RandomAffine(15, translate=(0.1, 0.1), scale=(0.9, 1.1)),
                          gpuaug.RandomResizedCrop(s)], seed=0)
    tb, tk, tm = Boxes(boxes, check=False), Keypoints(pts, check=False), Masks(masks)

    def images():
        return pol(x)

    def with_targets():
        return pol(x, boxes=tb, keypoints=tk, masks=tm)

    def boxes_kp_only():
        return pol(x, boxes=tb, keypoints=tk)

    # sanity: the targets come back and the masks have the images' size
    y, rb, rk, rm = with_targets()
    cp.cuda.Device().synchronize()
    assert rm.data.shape == (n, s, s) and rb.data.shape == (n, m, 4) and rk.data.shape == (n, k, 2)
    kept = int(rb.counts.sum().get())

    from gpuaug.bench import GpuClock
    from gpuaug._batch import as_batch
    from gpuaug.targets import _policy as TP

    # the launches one call makes (CuPy's profiler hooks are not needed: count our own)
    from gpuaug.targets import _apply as TA

    launches = []
    real_launch = TA._launch
    TA._launch = lambda db, dp, dm=None: launches.append("target_all" if dm is not None else "target_both") or \
        real_launch(db, dp, dm)
    with_targets()
    TA._launch = real_launch

    real_stage = TP.map_stage

    def two_launches():
        TP.map_stage = lambda *a, **k: None
        try:
            return pol(x, boxes=tb, keypoints=tk, masks=tm)
        finally:
            TP.map_stage = real_stage

    pol(x, boxes=tb, keypoints=tk, masks=tm, seed=1)
    params = pol.last_params
    pt = TP.PolicyTargets(as_batch(x), np.array([[s, s]] * n), tb, tk, tm)

    def targets_alone():
        return pt.run(pol, params, "uint8", None, "cuda")

    def targets_alone_two():
        TP.map_stage = lambda *a, **k: None
        try:
            return pt.run(pol, params, "uint8", None, "cuda")
        finally:
            TP.map_stage = real_stage

    from gpuaug import _stream
    from gpuaug.policy import compose as C

    def no_fork():  # the targets' launch after the images' kernel, on the call's stream
        C.OVERLAP_TARGETS = False
        try:
            return with_targets()
        finally:
            C.OVERLAP_TARGETS = True

    def _highest_priority():  # CUDA's greatest priority (CuPy's runtime module may not wrap the query)
        q = getattr(cp.cuda.runtime, "deviceGetStreamPriorityRange", None)
        return q()[1] if q is not None else -5

    def high_priority():  # the side stream at the device's highest priority (set around its row)
        return with_targets()

    clock = GpuClock()
    rows = {}
    for name, fn in (("gpuaug images", images), ("gpuaug images+boxes+keypoints", boxes_kp_only),
                     ("gpuaug images+boxes+keypoints+masks", with_targets),
                     ("  same, targets after the images (no fork)", no_fork),
                     ("  same, side stream at high priority", high_priority),
                     ("  same, two launches (before)", two_launches),
                     ("  targets alone, one launch", targets_alone),
                     ("  targets alone, two launches (before)", targets_alone_two)):
        if fn is high_priority:  # a side stream made again, at the highest priority
            cp.cuda.Device().synchronize()
            _stream.SIDE_PRIORITY, _stream._SIDES.d = _highest_priority(), {}
        t = clock.time(fn, args.iters, args.warmup)
        rows[name] = {"device_ms": t.ms, "host_us": t.host_us, "host_bound": t.host_bound,
                      "loop_ms": clock.loop(fn, k=args.iters)}
        if fn is high_priority:
            cp.cuda.Device().synchronize()
            _stream.SIDE_PRIORITY, _stream._SIDES.d = None, {}

    # SSD-style: RandomIoUCrop + flip with boxes (labels follow)
    from gpuaug.targets import RandomIoUCrop, sample_policy

    ssd = gpuaug.Compose([RandomIoUCrop(300), gpuaug.RandomHorizontalFlip()], seed=0)
    xs = cp.asarray(rng.integers(0, 256, (n, 400, 500, 3), dtype=np.uint8))
    sb = cp.asarray(np.stack([b[..., 0] * 2, b[..., 1] * 1.6, b[..., 2] * 2, b[..., 3] * 1.6], -1).astype(np.float32))
    ssd_boxes = Boxes(sb, check=False, labels=cp.asarray(rng.integers(1, 81, (n, m)).astype(np.int32)))

    def ssd_sample():
        return sample_policy(ssd, xs, boxes=ssd_boxes)

    p_ssd = ssd_sample()

    def ssd_call():
        return ssd(xs, params=p_ssd, boxes=ssd_boxes)

    def ssd_images():
        return ssd(xs, params=p_ssd)

    for name, fn in (("SSD: images 400x500 -> 300x300, replayed params", ssd_images),
                     ("SSD: images + boxes + labels, replayed params", ssd_call)):
        if fn is high_priority:  # a side stream made again, at the highest priority
            cp.cuda.Device().synchronize()
            _stream.SIDE_PRIORITY, _stream._SIDES.d = _highest_priority(), {}
        t = clock.time(fn, args.iters, args.warmup)
        rows[name] = {"device_ms": t.ms, "host_us": t.host_us, "host_bound": t.host_bound,
                      "loop_ms": clock.loop(fn, k=args.iters)}
        if fn is high_priority:
            cp.cuda.Device().synchronize()
            _stream.SIDE_PRIORITY, _stream._SIDES.d = None, {}
    # sample_policy reads the chosen windows back (a synchronisation): loop time only
    rows["SSD: sample_policy (draw + IoU crop selection on the device + readback)"] = {
        "device_ms": float("nan"), "loop_ms": clock.loop(ssd_sample, k=args.iters)}

    kornia_err = None
    try:
        import kornia.augmentation as K
        import torch

        tx = torch.from_dlpack(x).permute(0, 3, 1, 2).float().div(255.0).contiguous()
        tmask = torch.from_dlpack(masks)[:, None].float()
        tbox = torch.from_dlpack(boxes).float()
        tkp = torch.from_dlpack(pts).float()
        aug = K.AugmentationSequential(
            K.RandomHorizontalFlip(), K.RandomAffine(15, translate=(0.1, 0.1), scale=(0.9, 1.1)),
            K.RandomResizedCrop((s, s)), data_keys=["input", "mask", "bbox_xyxy", "keypoints"])
        aug_img = K.AugmentationSequential(
            K.RandomHorizontalFlip(), K.RandomAffine(15, translate=(0.1, 0.1), scale=(0.9, 1.1)),
            K.RandomResizedCrop((s, s)), data_keys=["input"])
        out = aug(tx, tmask, tbox, tkp)
        assert out[0].shape[0] == n
        iters = max(5, args.iters // 5)
        rows["kornia images (float32 NCHW)"] = {"device_ms": torch_event_ms(lambda: aug_img(tx), iters, 3)}
        rows["kornia images+mask+bbox_xyxy+keypoints"] = {
            "device_ms": torch_event_ms(lambda: aug(tx, tmask, tbox, tkp), iters, 3)}
    except Exception as e:  # noqa: BLE001 - reported, not fatal
        kornia_err = f"{type(e).__name__}: {e}"

    base = rows["gpuaug images"]["device_ms"]
    full = rows["gpuaug images+boxes+keypoints+masks"]["device_ms"]
    ratio = full / base
    dev = cp.cuda.runtime.getDeviceProperties(0)["name"].decode()
    print(f"device: {dev}; batch {n}x{s}x{s}x3 uint8, {m} boxes, {k} keypoints, one {s}x{s} uint8 mask per image")
    print(f"policy: RandomHorizontalFlip + RandomAffine(15, translate 0.1, scale 0.9-1.1) + RandomResizedCrop({s})")
    print(f"boxes kept after the policy: {kept} of {n * m}")
    print(f"target launches per policy call: {launches} (target_all: boxes, keypoints and masks in one)")
    print(f"{'path':45s} {'device ms':>10s} {'host ms':>9s} {'loop ms':>9s}")
    for name, r in rows.items():
        host = r.get("host_us")
        print(f"{name:45s} {r['device_ms']:10.3f} {host / 1e3 if host else float('nan'):9.3f} "
              f"{r.get('loop_ms', float('nan')):9.3f}{'  (host-bound: device ms includes gaps)' if r.get('host_bound') else ''}")
    print(f"images+targets / images (device): {ratio:.2f}x (target <= 1.3x: {'MET' if ratio <= 1.3 else 'NOT MET'})")
    nofork = rows["  same, targets after the images (no fork)"]["device_ms"] / base
    print(f"  the targets after the images on one stream (no fork): {nofork:.2f}x; side stream at high priority: "
          f"{rows['  same, side stream at high priority']['device_ms'] / base:.2f}x")
    before = rows["  same, two launches (before)"]["device_ms"] / base
    print(f"  the two-launch path of before: {before:.2f}x; targets alone: "
          f"{rows['  targets alone, one launch']['device_ms']:.3f} ms one launch vs "
          f"{rows['  targets alone, two launches (before)']['device_ms']:.3f} ms two")
    kk = rows.get("kornia images+mask+bbox_xyxy+keypoints")
    result = {"device": dev, "n": n, "size": s, "boxes": m, "keypoints": k, "rows": rows, "ratio": ratio,
              "ratio_two_launches": before, "ratio_no_fork": nofork, "launches": launches, "kept_boxes": kept, "kornia_error": kornia_err}
    if kk:
        speed = kk["device_ms"] / full
        loop_speed = kk["device_ms"] / rows["gpuaug images+boxes+keypoints+masks"]["loop_ms"]
        result["vs_kornia_device"], result["vs_kornia_loop"] = speed, loop_speed
        print(f"kornia / gpuaug (images+targets): {speed:.1f}x device, {loop_speed:.1f}x loop "
              f"(target >= 10x: {'MET' if speed >= 10 else 'NOT MET'})")
    else:
        print(f"kornia: not measured ({kornia_err})")
    out = os.environ.get("OUT")
    if out:
        os.makedirs(out, exist_ok=True)
        with open(os.path.join(out, "targets_bench.json"), "w") as f:
            json.dump(result, f, indent=2)
        print(f"wrote {os.path.join(out, 'targets_bench.json')}")


if __name__ == "__main__":
    main()
