"""Per-line costs of _params.host_rows and crop_mirror_normalize._host_params on this host
(timeit minimum, us per call): where the NumPy-call budget of a per-sample op goes."""
import timeit

import numpy as np

from gpuaug._params import count_nonzero, host_rows
from gpuaug.ops.brightness import _ROWS as BR
from gpuaug.ops.color_jitter import _ROWS as CJ
from gpuaug.ops.crop_mirror_normalize import _host_params, _plain_channels

n = 32
rng = np.random.default_rng(0)
f1 = rng.uniform(0.5, 1.5, n)
vals = tuple(rng.uniform(0.6, 1.4, n) for _ in range(4))
maxv = np.full(n, 255.0)
t = np.empty((2, n))
got = t[:1]
lo, hi = BR.rows(n)
pos, mir, hw = rng.random((n, 2)), rng.random(n) < 0.5, np.full((n, 2), 168.0)
mean, std = rng.uniform(100, 150, (n, 1)), rng.uniform(50, 70, (n, 1))
p = np.empty((n, 11))
g = globals()
for stmt in ["host_rows((f1,), n, BR, maxv)", "host_rows(vals, n, CJ, maxv)", "np.empty((2, n))", "t[0] = f1",
             "count_nonzero(np.isfinite(got))", "BR.rows(n)", "got < lo", "ok = got >= lo; ok &= got <= hi",
             "count_nonzero(got)", "t.T", "_host_params(n, 3, pos, mir, hw, mean, std)", "_plain_channels(mean, n, 3)",
             "p[:, :2] = pos", "p[:, 2] = mir", "p[:, 5:8] = mean", "count_nonzero(p[:, 8:])", "np.isfinite(mean)",
             "f1.astype(np.float64)", "np.zeros(32)", "a = 1 + 1"]:
    r = min(timeit.repeat(stmt, globals=g, number=5000, repeat=7)) / 5000 * 1e6
    print(f"{r:7.2f} us  {stmt}")
print(np.__version__)
