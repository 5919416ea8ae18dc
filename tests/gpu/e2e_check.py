"""tests/gpu/e2e.sh step 1b: the mixed-decode DALI folder pipeline against the same pipeline
on the CPU (same seed: same boxes, flips); prints PASS or FAIL per setting.
"""
import os as _os
import sys as _sys

_sys.path.insert(0, _os.path.join(_os.path.dirname(_os.path.abspath(__file__)), "..", ".."))

import numpy as np
import gpuaug.dali as gd
from gpuaug import bench_e2e as B

root = B.synthetic_folder(256, seed=1, workers=8)
ok = True
for name, kw in (("validation", dict(training=False)), ("train flip", dict(augment="flip")),
                 ("train default", dict(augment="default"))):
    outs = []
    for dev in (0, None):
        pipe = gd.image_folder_pipeline(root, size=224, batch_size=32, device_id=dev, num_threads=4, seed=7, **kw)
        pipe.build()
        imgs, labels = pipe.run()
        if dev is not None:
            imgs, labels = imgs.as_cpu(), labels.as_cpu()
        outs.append((np.stack([np.array(t) for t in imgs]), np.concatenate([np.array(t) for t in labels])))
        del pipe
    (g, gl), (c, cl) = outs
    d = np.abs(g - c) * 58  # ~uint8 units
    good = g.shape == c.shape == (32, 3, 224, 224) and (gl == cl).all() and d.mean() < 2.0
    ok &= bool(good)
    print(f"{name:14s} GPU vs CPU pipeline: shape {g.shape}, labels equal {bool((gl == cl).all())}, "
          f"|diff| mean {d.mean():.2f} p99 {np.percentile(d, 99):.1f} max {d.max():.0f} (uint8 units; "
          f"nvJPEG vs libjpeg decode)  {'PASS' if good else 'FAIL'}")
print("pipeline check:", "PASS" if ok else "FAIL")
