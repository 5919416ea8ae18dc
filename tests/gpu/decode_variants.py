"""nvImageCodec call forms against GIL pressure (issue 12): which way of calling the batched
decoder does not hand the GIL back and forth per image. Each form is timed alone and beside one
spinning Python thread, on 64 JPEGs.

    python3 tests/gpu/decode_variants.py
"""
from __future__ import annotations

import os
import threading
import time

import cupy as cp
import numpy as np


def main():
    from nvidia import nvimgcodec as nv

    from gpuaug.bench_e2e import synthetic_folder
    from gpuaug.scheduler._decode import GpuDecoder, read_file

    root = synthetic_folder(2048)
    files = sorted(os.path.join(d, f) for d, _, fs in os.walk(root) for f in fs)[:64]
    datas = [read_file(f) for f in files]
    arrs = [np.frombuffer(d, np.uint8) for d in datas]
    g = GpuDecoder(0)
    dec, params = g.decoder, g.params
    stream = cp.cuda.Stream(non_blocking=True)
    css = [nv.CodeStream(d) for d in datas]
    forms = {
        "decode(CodeStream(bytes)) [gpuaug today]": lambda: dec.decode([nv.CodeStream(d) for d in datas],
                                                                        params=params, cuda_stream=stream.ptr),
        "decode(prebuilt CodeStreams)": lambda: dec.decode(css, params=params, cuda_stream=stream.ptr),
        "decode(list of bytes)": lambda: dec.decode(datas, params=params, cuda_stream=stream.ptr),
        "decode(list of uint8 arrays)": lambda: dec.decode(arrs, params=params, cuda_stream=stream.ptr),
        "read(list of paths)": lambda: dec.read(files, params=params, cuda_stream=stream.ptr),
        "decode(...) without cuda_stream": lambda: dec.decode(css, params=params),
    }
    stop = threading.Event()

    def spin():
        x = 0
        while not stop.is_set():
            x += 1

    for name, fn in forms.items():
        try:
            out = fn()
            stream.synchronize()
            assert len(out) == len(datas) and all(o is not None for o in out)
            res = []
            for pressure in (False, True):
                th = None
                if pressure:
                    stop.clear()
                    th = threading.Thread(target=spin, daemon=True)
                    th.start()
                    time.sleep(0.02)
                ts = []
                for _ in range(3):
                    t0 = time.perf_counter()
                    fn()
                    stream.synchronize()
                    ts.append((time.perf_counter() - t0) * 1e3)
                if th is not None:
                    stop.set()
                    th.join()
                res.append(np.median(ts))
            print(f"{name:45s} alone {res[0]:7.1f} ms   beside a spinning thread {res[1]:8.1f} ms", flush=True)
        except Exception as e:  # noqa: BLE001
            print(f"{name:45s} FAILED {type(e).__name__}: {str(e)[:150]}", flush=True)
    print("switch interval", __import__("sys").getswitchinterval())


if __name__ == "__main__":
    main()
