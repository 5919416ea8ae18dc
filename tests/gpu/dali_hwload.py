"""DALI's decoder split on the GPU machine (issue 12: gpuaug.dali.image_folder_pipeline against
DALI's built-ins): both pipelines of ``gpuaug bench --e2e`` (RRC + flip + normalize, float32
NCHW, batch 256, 14 threads) with the decoder's ``hw_decoder_load`` at DALI's default and at
other values, in alternating order, ``--rounds`` rounds; images/s per row and the ratio.

    python3 tests/gpu/dali_hwload.py [--loads default,0.8,0.95] [--rounds 2] [--epochs 3]

Prints a table; writes $OUT/dali_hwload.json.
"""
import argparse
import json
import os
import statistics
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", ".."))

from gpuaug.bench import e2e as E  # noqa: E402


def dali_builtin(st, load):
    kw = {} if load is None else {"hw_decoder_load": load}

    def decode(fn, types, jpegs, device):
        return fn.decoders.image_random_crop(jpegs, device=device, output_type=types.RGB, random_area=[0.08, 1.0],
                                             random_aspect_ratio=[3 / 4, 4 / 3], num_attempts=10, **kw)

    return E._dali_builtin(st, decode)


def gpuaug_pipeline(st, load):
    import gpuaug.dali as gd

    pipe = gd.image_folder_pipeline(st.root, "flip", size=st.size, batch_size=st.batch, device_id=st.device_id,
                                    num_threads=st.workers, seed=st.seed, mean=E.MEAN255, std=E.STD255,
                                    decoder_kwargs=None if load is None else {"hw_decoder_load": load})
    return E._dali_loader(pipe, st)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--loads", default="default,0.8,0.95")
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--epochs", type=int, default=3)
    ap.add_argument("--images", type=int, default=4096)
    a = ap.parse_args()
    import torch

    st = E.Settings(root=E.synthetic_folder(a.images), batch=256, workers=14)
    loads = [None if v == "default" else float(v) for v in a.loads.split(",")]
    rows = {}
    for r in range(a.rounds):
        for load in loads:
            order = [("dali", dali_builtin), ("gpuaug", gpuaug_pipeline)]
            if r % 2:
                order.reverse()
            for name, make in order:
                loader = make(st, load)
                busy = E.GpuBusy(torch.cuda.current_device())
                m = E.measure(loader, epochs=a.epochs, busy=busy)
                loader.close()
                del loader
                E._free_gpu()
                key = f"{name} hw_decoder_load={'default' if load is None else load}"
                rows.setdefault(key, []).append(m["images_per_s"])
                print(f"round {r} {key:36s} {m['images_per_s']:9,.0f} img/s  GPU busy {m['gpu_busy_pct'] or 0:5.1f} %"
                      f"  CPU {m['cpu_cores']:5.2f} cores", flush=True)
    print(f"\n{torch.cuda.get_device_name()}; median images/s over {a.rounds} rounds")
    for load in loads:
        tag = "default" if load is None else load
        d = statistics.median(rows[f"dali hw_decoder_load={tag}"])
        g = statistics.median(rows[f"gpuaug hw_decoder_load={tag}"])
        print(f"hw_decoder_load={tag!s:8s} DALI built-ins {d:9,.0f}  gpuaug pipeline {g:9,.0f}  ratio {g / d:.3f}")
    out = os.environ.get("OUT", ".")
    with open(os.path.join(out, "dali_hwload.json"), "w") as f:
        json.dump({"gpu": torch.cuda.get_device_name(), "rows": rows}, f, indent=1)


if __name__ == "__main__":
    main()
