"""Where does a GPU python_function pipeline abort? (lead's probe on the GPU machine)

Runs small DALI GPU pipelines, each in its own process (a DALI abort kills the process), from
the bare python_function up to gpuaug.dali ops, under each executor, and prints the exit
status and the end of stderr of each stage.

    python3 tests/gpu/dali_debug.py            # all stages
    python3 tests/gpu/dali_debug.py STAGE EXEC # one stage in this process
"""
from __future__ import annotations

import os
import subprocess
import sys
import time

STAGES = ("raise_gpuaug", "raise_gpuaug_then_rebuild", "raise_gpuaug_twice", "raise_plain")
EXECS = ("default", "sync")


def _pipe_kwargs(ex):
    kw = dict(batch_size=4, num_threads=2, device_id=0, prefetch_queue_depth=1)
    if ex == "sync":
        kw.update(exec_async=False, exec_pipelined=False)
    elif ex == "dynamic":
        kw.update(exec_dynamic=True)
    return kw


def stage(name, ex):
    import faulthandler

    faulthandler.enable()
    import numpy as np
    from nvidia.dali import fn, pipeline_def

    x = np.random.default_rng(0).integers(0, 256, (4, 33, 47, 3), dtype=np.uint8)
    flags = [np.int32(v) for v in (1, 0, 1, 0)]
    angles = [np.float32(v) for v in (5, -10, 20, 0)]

    def data():
        return fn.external_source(source=lambda: [x[i] for i in range(4)], batch=True, device="gpu", layout="HWC")

    def graph():
        d = data()
        if name == "identity":
            return fn.python_function(d, function=lambda a: a, batch_processing=True, device="gpu")
        if name == "cupy_flip":
            import cupy as cp

            def f(a):
                return [cp.ascontiguousarray(s[:, ::-1]) for s in a]
            return fn.python_function(d, function=f, batch_processing=True, device="gpu")
        if name == "gpuaug_flip_direct":
            import cupy as cp

            import gpuaug

            def f(a):
                return list(gpuaug.flip(cp.stack(a), horizontal=True))
            return fn.python_function(d, function=f, batch_processing=True, device="gpu")
        if name == "raise_two_inputs":
            def f(a, b):
                raise ValueError("planted error")
            two = fn.external_source(source=lambda: flags, batch=True).gpu()
            return fn.python_function(d, two, function=f, batch_processing=True, device="gpu")
        if name == "raise_caught_inside":
            def f(a):
                try:
                    raise TypeError("caught")
                except TypeError:
                    pass
                return a
            return fn.python_function(d, function=f, batch_processing=True, device="gpu")
        if name in ("pad_const", "pad_param_host_copy", "pad_param_varshape", "resize_const"):
            import cupy as cp

            import gpuaug

            pads = np.array([[1, 2, 3, 4]] * 4)

            def f(a, b=None):
                if name == "resize_const":
                    return list(gpuaug.resize(cp.stack(a), size=(20, 30)))
                if name == "pad_const":
                    return list(gpuaug.pad(cp.stack(a), padding=(1, 2, 3, 4)))
                if name == "pad_param_host_copy":
                    return list(gpuaug.pad(cp.stack(a), padding=cp.stack(b).get()))
                return gpuaug.pad(list(a), padding=pads)
            if name == "pad_param_host_copy":
                node = fn.external_source(source=lambda: [np.array([1, 2, 3, 4], np.int32)] * 4, batch=True).gpu()
                return fn.python_function(d, node, function=f, batch_processing=True, device="gpu")
            return fn.python_function(d, function=f, batch_processing=True, device="gpu")
        if name == "get_inside":
            def f(a):
                a[0].get()
                return a
            return fn.python_function(d, function=f, batch_processing=True, device="gpu")
        if name == "pinned_get_inside":
            import cupy as cp

            def f(a):
                h = cp.cuda.alloc_pinned_memory(a[0].nbytes)
                a[0].data.copy_to_host_async(h.ptr, a[0].nbytes, cp.cuda.get_current_stream())
                cp.cuda.get_current_stream().synchronize()
                return a
            return fn.python_function(d, function=f, batch_processing=True, device="gpu")
        if name == "sync_inside":
            import cupy as cp

            def f(a):
                cp.cuda.get_current_stream().synchronize()
                return a
            return fn.python_function(d, function=f, batch_processing=True, device="gpu")
        if name.startswith("raise_"):
            def f(a):
                if name == "raise_after_cupy":
                    import cupy as cp
                    cp.cuda.UnownedMemory(a[0].data.ptr, a[0].nbytes, a, a[0].device.id)
                if name == "raise_runtime":
                    raise RuntimeError("planted error")
                raise ValueError("planted error")
            if name == "raise_per_sample":
                return fn.python_function(d, function=lambda a: (_ for _ in ()).throw(ValueError("planted")),
                                          device="gpu")
            if name.startswith("raise_gpuaug"):
                import gpuaug.dali as gd
                return gd.brightness(d, factor=fn.external_source(source=lambda: [np.ones(2, np.float32)] * 4, batch=True))
            return fn.python_function(d, function=f, batch_processing=True, device="gpu")
        import gpuaug.dali as gd
        if name == "dali_pad_param":
            return gd.pad(d, padding=fn.external_source(source=lambda: [np.array([1, 2, 3, 4], np.int32)] * 4,
                                                        batch=True))
        if name == "dali_rot90_param":
            return gd.rot90(d, k=fn.external_source(source=lambda: [np.int32(v) for v in (1, 0, 3, 1)], batch=True))
        if name == "dali_crop_param":
            return gd.crop(d, top=fn.external_source(source=lambda: [np.int32(v) for v in (1, 0, 3, 1)], batch=True),
                           height=20, width=30)
        if name in ("dali_flip", "many_pipelines"):
            return gd.flip(d, horizontal=True)
        if name == "dali_flip_param":
            return gd.flip(d, horizontal=fn.external_source(source=lambda: flags, batch=True))
        if name == "dali_rotate_param":
            return gd.rotate(d, angle=fn.external_source(source=lambda: angles, batch=True))
        if name == "dali_numba_flip":
            import warnings
            warnings.simplefilter("ignore")
            return gd.flip(d, horizontal=True, backend="numba")
        raise SystemExit(f"unknown stage {name}")

    if name.startswith("raise_") or name in ("get_inside", "sync_inside", "pinned_get_inside", "pad_const",
                                             "pad_param_host_copy", "pad_param_varshape", "resize_const"):
        pipe = pipeline_def(graph, **_pipe_kwargs(ex))()
        pipe.build()
        for attempt in range(2 if name in ("raise_twice_same_pipe", "raise_gpuaug_twice") else 1):
            try:
                pipe.run()
                print(f"{name}/{ex}: ran{'' if not name.startswith('raise_') else ' (NO ERROR RAISED)'}", flush=True)
            except Exception as e:  # noqa: BLE001
                print(f"{name}/{ex}: raised {type(e).__name__}: {str(e).splitlines()[0][:200]}", flush=True)
        del pipe
        if name not in ("raise_then_rebuild", "raise_gpuaug_then_rebuild"):
            print(f"{name}/{ex}: pipeline deleted", flush=True)
            return
        name = "dali_flip"
    pipes = 12 if name == "many_pipelines" else 1
    for _ in range(pipes):
        pipe = pipeline_def(graph, **_pipe_kwargs(ex))()
        pipe.build()
        for _ in range(3):
            out, = pipe.run()
        got = np.stack([np.array(t) for t in out.as_cpu()])
        del pipe, out
    if name == "identity":
        ref = x
    elif name in ("dali_rotate_param", "dali_rot90_param", "dali_crop_param"):
        ref = None
    elif name == "dali_pad_param":
        ref = np.pad(x, ((0, 0), (1, 2), (3, 4), (0, 0)))
    elif name == "dali_flip_param":
        ref = np.stack([x[i, :, ::-1] if flags[i] else x[i] for i in range(4)])
    else:
        ref = x[:, :, ::-1]
    ok = "unchecked" if ref is None else ("OK" if np.array_equal(got, ref) else "MISMATCH")
    print(f"{name}/{ex}: {got.shape} {ok}")


def main():
    if len(sys.argv) == 3:
        stage(sys.argv[1], sys.argv[2])
        return
    import nvidia.dali
    print("DALI", nvidia.dali.__version__, flush=True)
    for name in STAGES:
        for ex in EXECS:
            t0 = time.time()
            p = subprocess.run([sys.executable, __file__, name, ex], capture_output=True, text=True, timeout=180,
                               env=dict(os.environ, PYTHONFAULTHANDLER="1"))
            tail = "\n    ".join((p.stdout + p.stderr).strip().splitlines()[-25 if p.returncode else -2:])
            print(f"[{name} / {ex}] rc={p.returncode} {time.time() - t0:.1f}s\n    {tail}", flush=True)


if __name__ == "__main__":
    main()
