"""Device time of erase kernel variants (CUDA events, medians) at 256x224x224x3 uint8, K=2 boxes
per sample (the bench's example), beside invert's vector kernel and a CuPy copy. Variants are
compiled here from kernels/erase.cu plus edits; each is checked against gpuaug.erase first.

    python3 tests/gpu/erase_dev.py [--n 256]
"""
import argparse

import cupy as cp
import numpy as np

import gpuaug
from gpuaug.bench.checks import example_kwargs
from gpuaug.kernels._cuda import KERNEL_DIR, NVRTC_OPTIONS

ap = argparse.ArgumentParser()
ap.add_argument("--n", type=int, default=256)
a = ap.parse_args()
n, h, w, c = a.n, 224, 224, 3
rng = np.random.default_rng(0)
x = cp.asarray(rng.integers(0, 256, (n, h, w, c), dtype=np.uint8))
kw = example_kwargs(gpuaug.registry["erase"], 1, n, h, w)
want = gpuaug.erase(x, **kw)
import gpuaug.ops.erase as E
got = {}
orig = E.run
def cap(b, k, params, **kws):
    got["params"] = params
    return orig(b, k, params, **kws)
E.run = cap
E.erase(x, **kw)
E.run = orig
par = cp.asarray(np.ascontiguousarray(got["params"], np.float32))
P = par.shape[1]
vpr = w * c // 16

BODY = open(f"{KERNEL_DIR}/erase.cu").read()
VARIANTS = {
    "file": "",
    "regs": r'''
template <typename T, int C>
__global__ void v_regs(const uint4* __restrict__ src, uint4* __restrict__ dst,
                       const float* __restrict__ params, int P, int n, int vpr, int h) {
  constexpr int PPT = 16 / sizeof(T), KMAX = 4;
  const int nvec = vpr * h, w = vpr * PPT / C;
  const int per_block = (nvec + gridDim.x - 1) / gridDim.x;
  const int begin = blockIdx.x * per_block, end = min(nvec, begin + per_block);
  for (int s = blockIdx.y; s < n; s += gridDim.y) {
    const float* p = params + (long long)s * P;
    T fill[4];
    for (int q = 0; q < 4; ++q) fill[q] = gpuaug::from_float<T>(p[q]);
    const int k = min((int)p[4], KMAX);
    float top[KMAX], bot[KMAX]; int lo[KMAX], hi[KMAX];
#pragma unroll
    for (int q = 0; q < KMAX; ++q) {
      if (q < k) {
        const float* bx = p + 5 + 4 * q;
        top[q] = bx[0]; bot[q] = bx[0] + bx[2];
        lo[q] = max(min((int)bx[1], w), 0) * C; hi[q] = max(min((int)(bx[1] + bx[3]), w), 0) * C;
      } else { top[q] = 1.f; bot[q] = 0.f; lo[q] = hi[q] = 0; }
    }
    const uint4* a = src + (long long)s * nvec; uint4* b = dst + (long long)s * nvec;
    for (int i = begin + (int)threadIdx.x; i < end; i += 4 * (int)blockDim.x) {
      gpuaug::vec16 v[4];
#pragma unroll
      for (int u = 0; u < 4; ++u) { const int j = i + u * (int)blockDim.x; if (j < end) v[u] = gpuaug::load16(a + j); }
#pragma unroll
      for (int u = 0; u < 4; ++u) {
        const int j = i + u * (int)blockDim.x;
        if (j >= end) continue;
        DIVIDE
        const int e0 = (j - y * vpr) * PPT;
        const float fy = (float)y;
#pragma unroll
        for (int q = 0; q < KMAX; ++q) {
          if (fy >= top[q] && fy < bot[q]) {
            const int l = lo[q] - e0, r = hi[q] - e0;
            if (l < PPT && r > 0) {
              const int c0 = e0 % C;
#pragma unroll
              for (int e = 0; e < PPT; ++e) if (e >= l && e < r) gpuaug::vset<T>(v[u], e, fill[(c0 + e) % C]);
            }
          }
        }
        gpuaug::store16(b + j, v[u]);
      }
    }
  }
}
''',
}
VARIANTS["regs_fdiv"] = VARIANTS["regs"].replace("v_regs", "v_regs_fdiv")
VARIANTS["regs"] = VARIANTS["regs"].replace("DIVIDE", "const int y = j / vpr;")
VARIANTS["regs_fdiv"] = VARIANTS["regs_fdiv"].replace("DIVIDE", """int y = (int)((float)j * (1.f / (float)vpr));
        if (y * vpr > j) --y; else if ((y + 1) * vpr <= j) ++y;""")

def timeit(f, reps=30, inner=10):
    for _ in range(5):
        f()
    st, en = cp.cuda.Event(), cp.cuda.Event()
    ts = []
    for _ in range(reps):
        st.record()
        for _ in range(inner):
            f()
        en.record()
        en.synchronize()
        ts.append(cp.cuda.get_elapsed_time(st, en) / inner * 1e3)
    return float(np.median(ts))

out = cp.empty_like(x)
grid = (max(1, -(-vpr * h // 1024)), min(n, 65535))
grids = {"unroll8": (max(1, -(-vpr * h // 2048)), min(n, 65535)), "unroll2": (max(1, -(-vpr * h // 512)), min(n, 65535))}
print(f"{cp.cuda.runtime.getDeviceProperties(0)['name'].decode()} n={n} P={P} grid={grid}")
res = {}
res["cupy copy"] = timeit(lambda: cp.copyto(out, x))
res["invert (u8 vec)"] = timeit(lambda: gpuaug.invert(x, out=out))
res["gpuaug.erase (this tree)"] = timeit(lambda: gpuaug.erase(x, **kw, out=out))
try:
    import gpuaug_base
    res["gpuaug_base.erase (replace_rows)"] = timeit(lambda: gpuaug_base.erase(x, **kw, out=out))
except ImportError:
    pass
BODIES = {"unroll8": BODY.replace("constexpr int ERASE_UNROLL = 4;", "constexpr int ERASE_UNROLL = 8;"),
          "unroll2": BODY.replace("constexpr int ERASE_UNROLL = 4;", "constexpr int ERASE_UNROLL = 2;")}
VARIANTS.update({k: "" for k in BODIES})
for name, extra in VARIANTS.items():
    fn_name = "gpuaug_erase_packed<unsigned char, 3>" if name in ("file",) + tuple(BODIES) else f"v_{name}<unsigned char, 3>"
    mod = cp.RawModule(code=BODIES.get(name, BODY) + extra, options=NVRTC_OPTIONS, name_expressions=[fn_name])
    fn = mod.get_function(fn_name)
    g = grids.get(name, grid)
    args = lambda p=par: (x, out, p, np.int32(P), np.int32(n), np.int32(vpr), np.int32(h))
    out.fill(0)
    fn(g, (256,), args())
    ok = bool((out == want).all())
    res[f"{name} (ok={ok})"] = timeit(lambda: fn(g, (256,), args()))
    p0 = par.copy(); p0[:, 4] = 0
    res[f"{name} K=0"] = timeit(lambda: fn(g, (256,), args(p0)))
from cupyx.profiler import benchmark
for name, f in (("gpuaug.erase out=", lambda: gpuaug.erase(x, **kw, out=out)),
                ("gpuaug.erase", lambda: gpuaug.erase(x, **kw)),
                ("GPUAUG_PLAN path off: E.erase", lambda: E.erase(x, **kw, out=out))):
    r = benchmark(f, n_repeat=200, n_warmup=20)
    res[f"{name}: cpu"] = float(np.median(r.cpu_times)) * 1e6
    res[f"{name}: gpu"] = float(np.median(r.gpu_times[0])) * 1e6
import gpuaug.kernels._cuda as cu
with cu.record() as log:
    E.erase(x, **kw, out=out)
print("launches (kernel, grid, block):", [(getattr(e[1], "__name__", repr(e[1]))[:60], e[2], e[3]) for e in log if e[0] == "launch"])
for k, v in res.items():
    print(f"{k:36s} {v:8.2f} us")
