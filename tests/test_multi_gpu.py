"""Several GPUs (marked `gpu`; skipped without two CUDA GPUs): device placement and torchrun.

- **Placement**: a fresh process runs the Scheduler (gpuaug ops and a fused Compose as its
  augment, CuPy and PyTorch outputs, GPU decode with nvImageCodec when installed), a
  standalone op and a DALI pipeline on GPU 1 and
  checks, after each stage, on which GPUs it holds a CUDA primary context (driver API
  ``cuDevicePrimaryCtxGetState``: exact, and independent of the PID namespace that can
  hide processes from nvidia-smi in containers); ``nvidia-smi --query-compute-apps`` is
  asked too and reported. A rank that owns GPU 1 must create nothing on GPU 0.
- **torchrun smoke**: ``examples/ddp_train.py`` with 2 ranks and 2 steps for both loaders;
  its all-gathered one-epoch check (disjoint, covering, drop_last's tail) must pass, and
  each rank must hold a context on its own GPU only.
- **the scaling bench** (``gpuaug bench --e2e --gpus``'s code, :mod:`gpuaug.bench.scaling`):
  the rank runner ``gpuaug.bench.ddp`` on 1 and 2 GPUs for the Scheduler with GPU decode and
  the DALI loader, on a small folder: every run ok, its epoch check passed, its ranks'
  contexts on their own GPUs only.

Run the probe by hand: ``python3 tests/test_multi_gpu.py --probe recipe`` (prints JSON).
"""
from __future__ import annotations

import ctypes
import json
import os
import subprocess
import sys
import tempfile

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def _gpu_count():
    try:
        import cupy

        return cupy.cuda.runtime.getDeviceCount()
    except Exception:  # noqa: BLE001 - no CuPy / no driver: skipped below
        return 0


def _has(mod):
    import importlib.util

    try:
        return importlib.util.find_spec(mod) is not None
    except (ImportError, ValueError):
        return False


# ---------------------------------------------------------------------------------------
# the probe (runs in its own process: contexts are per process)
# ---------------------------------------------------------------------------------------
def contexts():
    """GPUs on which this process has an active primary CUDA context."""
    cu = ctypes.CDLL("libcuda.so.1")
    assert cu.cuInit(0) == 0
    n = ctypes.c_int()
    cu.cuDeviceGetCount(ctypes.byref(n))
    active = []
    for i in range(n.value):
        dev, flags, on = ctypes.c_int(), ctypes.c_uint(), ctypes.c_int()
        assert cu.cuDeviceGet(ctypes.byref(dev), i) == 0
        assert cu.cuDevicePrimaryCtxGetState(dev, ctypes.byref(flags), ctypes.byref(on)) == 0
        if on.value:
            active.append(i)
    return active


def _smi_gpus_of(pid):
    """Indices of the GPUs nvidia-smi lists ``pid`` on (None: nvidia-smi unusable; [] may
    also mean the PID namespace hides this process)."""
    try:
        apps = subprocess.run(["nvidia-smi", "--query-compute-apps=pid,gpu_uuid", "--format=csv,noheader"],
                              capture_output=True, text=True, timeout=30).stdout
        gpus = subprocess.run(["nvidia-smi", "--query-gpu=index,uuid", "--format=csv,noheader"],
                              capture_output=True, text=True, timeout=30).stdout
    except (OSError, subprocess.SubprocessError):
        return None
    index = {u.strip(): int(i) for i, u in (line.split(",") for line in gpus.strip().splitlines() if "," in line)}
    return sorted(index.get(u.strip(), -1) for p, u in (line.split(",") for line in apps.strip().splitlines()
                                                       if "," in line) if p.strip() == str(pid))


def probe(variant):
    """Stages on GPU 1; the contexts after each. ``variant``: "recipe" (the thread that
    consumes batches first makes GPU 1 current: cupy.cuda.Device(1).use() and
    torch.cuda.set_device(1), as a torchrun rank does) or "bare" (it never does)."""
    import numpy as np

    log = []

    def stage(name):
        log.append((name, contexts()))

    stage("start")
    import cupy as cp

    import gpuaug
    stage("import cupy, gpuaug")
    if variant == "recipe":
        cp.cuda.Device(1).use()
        stage("cupy.cuda.Device(1).use()")
    x = np.random.default_rng(0).integers(0, 256, (64, 40, 48, 3), dtype=np.uint8)
    policy = gpuaug.Compose([gpuaug.RandomHorizontalFlip(), gpuaug.RandomRotation(10), gpuaug.ColorJitter(0.2, 0.2),
                             gpuaug.Normalize((0.5, 0.5, 0.5), (0.25, 0.25, 0.25))], seed=0, draws="host")
    sched = gpuaug.Scheduler(x, policy, batch_size=16, device=1, workers=2, shuffle=True, seed=0)
    stage("Scheduler(device=1)")
    devs = set()
    for images, _ in sched:
        devs.add(images.device.id)
    stage("epoch, CuPy output")
    sched.close()
    st = gpuaug.Scheduler(x, "flip", batch_size=16, device=1, pin_source=True)
    for images, _ in st:
        devs.add(images.device.id)
    st.close()
    stage("epoch, flip, pin_source")
    if variant == "recipe":
        y = gpuaug.gaussian_blur(cp.asarray(x[:4]), sigma=1.0)
        devs.add(y.device.id)
        cp.cuda.Device(1).synchronize()
        stage("standalone op on GPU 1")
    if _has("torch"):
        import torch

        if variant == "recipe":
            torch.cuda.set_device(1)
            stage("torch.cuda.set_device(1)")
        s2 = gpuaug.Scheduler(x, "flip", batch_size=16, device=1, output="torch")
        for images, _ in s2:
            devs.add(images.device.index)
        s2.close()
        stage("epoch, torch output")
    from PIL import Image

    root = tempfile.mkdtemp()
    files = []
    for c in range(2):
        os.makedirs(os.path.join(root, f"c{c}"))
        for i in range(8):
            files.append(os.path.join(root, f"c{c}", f"{i}.jpg"))
            Image.fromarray(x[c * 8 + i]).save(files[-1])
    if variant == "recipe" and _has("nvidia.nvimgcodec"):
        import inspect

        from gpuaug.scheduler import ImageFiles

        if "decode" in inspect.signature(ImageFiles).parameters:
            s3 = gpuaug.Scheduler(ImageFiles(files, size=(32, 32), decode="gpu", crop="random", seed=0), "flip",
                                  batch_size=4, device=1, workers=2)
            for images, _ in s3:
                devs.add(images.device.id)
            s3.close()
            stage("epoch, ImageFiles(decode='gpu') (nvImageCodec)")
    if variant == "recipe" and _has("nvidia.dali"):
        import gpuaug.dali as gd

        pipe = gd.image_folder_pipeline(root, size=32, batch_size=4, device_id=1, num_threads=2, seed=1)
        pipe.build()
        for _ in range(3):
            images, _ = pipe.run()
        del pipe, images
        stage("DALI image_folder_pipeline(device_id=1)")
    return {"variant": variant, "stages": log, "output_devices": sorted(devs), "pid": os.getpid(),
            "nvidia_smi_gpus_of_pid": _smi_gpus_of(os.getpid())}


# ---------------------------------------------------------------------------------------
# tests
# ---------------------------------------------------------------------------------------
two_gpus = pytest.mark.skipif(_gpu_count() < 2, reason="needs two CUDA GPUs")
pytestmark = [pytest.mark.gpu, two_gpus]


def _run_probe(variant):
    r = subprocess.run([sys.executable, os.path.abspath(__file__), "--probe", variant], capture_output=True,
                       text=True, timeout=300, cwd=ROOT)
    line = [ln for ln in r.stdout.splitlines() if ln.startswith("PROBE ")]
    assert r.returncode == 0 and line, f"probe failed (rc {r.returncode}):\n{r.stdout[-3000:]}\n{r.stderr[-3000:]}"
    res = json.loads(line[-1][len("PROBE "):])
    print("\n" + json.dumps(res, indent=1))
    return res


def _first_on_gpu0(res):
    return next((name for name, ctx in res["stages"] if 0 in ctx), None)


def test_placement_on_gpu1_recipe():
    """A rank that makes its GPU current first (as examples/ddp_train.py does) runs the
    Scheduler, ops, PyTorch output and DALI on GPU 1 with no context on GPU 0."""
    res = _run_probe("recipe")
    assert res["output_devices"] == [1]
    assert res["stages"][-1][1] == [1], res["stages"]
    assert _first_on_gpu0(res) is None, f"a context on GPU 0 appeared at stage {_first_on_gpu0(res)!r}"
    smi = res["nvidia_smi_gpus_of_pid"]
    assert not smi or 0 not in smi, f"nvidia-smi lists the process on GPU 0: {smi}"


@pytest.mark.xfail(strict=False, reason=(
    "expected to fail: in a thread that never selected a device, CuPy's `with Device(1):` (the "
    "Scheduler's device context in next()/release()) restores device 0 on exit, and since CUDA 12 "
    "cudaSetDevice(0) creates device 0's primary context; make the rank's GPU current first "
    "(cupy.cuda.Device(r).use() / torch.cuda.set_device(r)), as the README says"))
def test_placement_on_gpu1_without_selecting_the_device():
    """The same without making GPU 1 current in the consuming thread: which stage, if any,
    creates a context on GPU 0 (the assertion message names it)."""
    res = _run_probe("bare")
    assert res["output_devices"] == [1]
    assert _first_on_gpu0(res) is None, f"a context on GPU 0 appeared at stage {_first_on_gpu0(res)!r}"


def _torchrun(args, tmp_path, nproc=2, timeout=400):
    out = tmp_path / "result.json"
    cmd = [sys.executable, "-m", "torch.distributed.run", "--standalone", f"--nproc_per_node={nproc}",
           os.path.join(ROOT, "examples", "ddp_train.py"), *args, "--json", str(out)]
    env = dict(os.environ, NCCL_NVLS_ENABLE="0", TORCH_SYMM_MEM_DISABLE_MULTICAST="1")
    r = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, cwd=ROOT, env=env)
    text = r.stdout + r.stderr
    print(text[-6000:])
    assert r.returncode == 0, f"torchrun failed (rc {r.returncode}):\n{text[-6000:]}"
    return json.loads(out.read_text())


@pytest.mark.skipif(not _has("torch"), reason="needs PyTorch")
@pytest.mark.parametrize("loader", ["scheduler", pytest.param("dali", marks=pytest.mark.dali)])
def test_torchrun_smoke_two_ranks(loader, tmp_path):
    """2 ranks, 2 steps of resnet18 under DDP, and the one-epoch disjointness check."""
    res = _torchrun(["--loader", loader, "--steps", "2", "--warmup", "0", "--batch", "16", "--size", "64",
                     "--load-size", "80", "--synthetic", "200", "--model", "resnet18"], tmp_path)
    assert res["world"] == 2 and [r["rank"] for r in res["ranks"]] == [0, 1]
    assert [r["device"] for r in res["ranks"]] == [0, 1]
    chk = res["check"]
    assert chk["ok"], chk
    assert chk["duplicates"] == 0 and chk["outside"] == 0
    assert chk["dropped"] == 200 - 2 * 16 * ((200 // 2) // 16) == chk["expected_dropped"]
    assert chk["samples"] == [96, 96]
    assert all(r["images"] == 2 * 16 for r in res["ranks"])
    for r in res["ranks"]:
        assert r["contexts"] == [r["device"]], f"rank {r['rank']} holds contexts on GPUs {r['contexts']}"


@pytest.mark.skipif(not _has("torch"), reason="needs PyTorch")
@pytest.mark.parametrize("path", ["scheduler_gpu", pytest.param("gpuaug_dali_rrc", marks=pytest.mark.dali)])
def test_scaling_bench_one_and_two_gpus(path, tmp_path):
    """scaling.run on 1 and 2 GPUs (what gpuaug bench --e2e --gpus 1,2 runs), 2 steps of 16 per rank."""
    from gpuaug.bench import e2e, scaling

    if path == "scheduler_gpu" and not _has("nvidia.nvimgcodec"):
        pytest.skip("needs nvImageCodec (GPU decode): pip install gpuaug[gpu-decode12]")
    root = e2e.make_folder(str(tmp_path / "f"), 96, seed=0, classes=4, min_side=64, max_side=128, workers=4)
    sec = scaling.run(root, "1,2", paths=[path], batch=16, size=64, load_size=80, steps=2, warmup=1,
                      log_dir=str(tmp_path / "logs"), timeout=300)
    print("\n" + scaling.format_table(sec))
    assert scaling.validate(sec) == []
    for r in sec["rows"]:
        assert r["status"] == "ok", (r["status"], open(r["log"]).read()[-4000:])
        assert r["check"] == "ok" and r["placement_ok"] is True, r["result"]
        assert [x["contexts"] for x in r["result"]["ranks"]] == [[d] for d in range(r["gpus"])]
    assert sec["rows"][0]["efficiency"] == 1.0 and sec["rows"][1]["efficiency"] > 0


if __name__ == "__main__":
    if len(sys.argv) == 3 and sys.argv[1] == "--probe":
        print("PROBE " + json.dumps(probe(sys.argv[2])), flush=True)
    else:
        raise SystemExit("usage: python3 tests/test_multi_gpu.py --probe {recipe,bare}")
