"""The njit twins use Numba's on-disk cache, keyed so that a binding or an edit cannot load
stale machine code (kernels/numba/_dual.py)."""
import json
import os
import subprocess
import sys

import numpy as np

from gpuaug.kernels.numba import _dual

_PROBE = r"""
import json, time, numpy as np, gpuaug
from gpuaug.kernels.numba import _dual
x = np.arange(2 * 5 * 7 * 3, dtype=np.uint8).reshape(2, 5, 7, 3)
t = time.perf_counter()
y = gpuaug.flip(x, horizontal=True)
dt = time.perf_counter() - t
builds = [b for d in _dual._cache.values() for b in (d.builds() if hasattr(d, "builds") else [d])]
hits = sum(sum(b.stats.cache_hits.values()) for b in builds if hasattr(b, "stats"))
misses = sum(sum(b.stats.cache_misses.values()) for b in builds if hasattr(b, "stats"))
print(json.dumps({"ok": bool((y == x[:, :, ::-1]).all()), "hits": hits, "misses": misses, "s": dt}))
"""


def _run(env):
    r = subprocess.run([sys.executable, "-c", _PROBE], env=env, capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr
    return json.loads(r.stdout.strip().splitlines()[-1])


def test_second_process_loads_the_cached_twin(tmp_path):
    env = dict(os.environ, NUMBA_CACHE_DIR=str(tmp_path), GPUAUG_NUMBA_CACHE="1")
    first = _run(env)
    assert first["ok"] and first["misses"] > 0 and first["hits"] == 0
    assert any(tmp_path.rglob("*.nbi")), "nothing was written to the cache"
    second = _run(env)
    assert second["ok"] and second["hits"] > 0 and second["misses"] == 0
    off = _run(dict(env, GPUAUG_NUMBA_CACHE="0"))
    assert off["ok"] and off["hits"] == 0   # GPUAUG_NUMBA_CACHE=0: compiled afresh


def _a(y, x, sh, sw, p):
    return y, x


def _b(y, x, sh, sw, p):
    return y, sw - 1 - x


def _b_edited(y, x, sh, sw, p):
    return y, sw - 2 - x


def test_cache_entry_names_differ_by_binding_edit_and_flags(monkeypatch):
    from gpuaug.kernels.numba import _driver

    monkeypatch.setattr(_dual, "_cache", {})   # this test's kernels only; restored after
    monkeypatch.setenv("GPUAUG_CPU_PARALLEL", "0")
    a = _dual.dual(_a)
    b = _dual.dual(_b)
    b2 = _dual.dual(_b_edited)
    names = {k: _driver.copy_kernel(f, "cpu").py_func.__qualname__ for k, f in
             [("a", a), ("b", b), ("b2", b2)]}
    assert len(set(names.values())) == 3, names   # other maths bound, or the maths edited
    monkeypatch.setenv("GPUAUG_CPU_PARALLEL", "1")
    monkeypatch.setattr(_dual, "_cache", {})
    par = _driver.copy_kernel(a, "cpu").py_func.__qualname__
    assert par != names["a"] and "[cpu-par-" in par
    monkeypatch.setattr(_dual, "_cache", {})
    monkeypatch.setenv("GPUAUG_CPU_PARALLEL", "0")
    assert _driver.copy_kernel(a, "cpu").py_func.__qualname__ == names["a"]   # stable
    # and the cached kernels compute what their own maths says:
    x = np.arange(12, dtype=np.float32).reshape(1, 2, 2, 3)
    for f, ref in [(a, x), (b, x[:, :, ::-1])]:
        k = _driver.copy_kernel(f, "cpu")
        dst = np.empty_like(x)
        k(x, dst, np.zeros((1, 1), np.float64), np.zeros((1, 3), np.float32))
        np.testing.assert_array_equal(dst, ref)
