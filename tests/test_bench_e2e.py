"""gpuaug bench --e2e on the CPU: the synthetic folder generator, the meters, the benchmark in
dry-run mode (rows, JSON schema, table, PNG, CLI) and the restructured
gpuaug.dali.image_folder_pipeline as a DALI CPU pipeline (region-of-interest decode, resize,
one fused gpuaug operator) against PIL decoding of the same box."""
from __future__ import annotations

import json
import multiprocessing as mp
import os
import time
import warnings

import numpy as np
import pytest

from gpuaug import bench_e2e as B


def _files(root):
    out = []
    for dirpath, _, names in os.walk(root):
        out += [os.path.join(dirpath, n) for n in names]
    return sorted(out)


# -- the synthetic folder -------------------------------------------------------------------


def test_make_folder_count_classes_sizes_decodable(tmp_path):
    from PIL import Image

    root = B.make_folder(str(tmp_path / "f"), 15, seed=3, classes=4, min_side=40, max_side=90, workers=1)
    classes = sorted(os.listdir(root))
    assert classes == [f"class_{k}" for k in range(4)]
    counts = [len(os.listdir(os.path.join(root, c))) for c in classes]
    assert counts == [4, 4, 4, 3]  # image i in class i % 4
    for f in _files(root):
        with Image.open(f) as im:
            assert im.format == "JPEG"
            a = np.asarray(im.convert("RGB"))
        h, w = a.shape[:2]
        assert 40 <= h <= 90 and 40 <= w <= 90, (f, a.shape)
        assert a.std() > 5  # a photo, not a flat colour
    info = B.folder_info(root)
    assert info["images"] == 15 and info["classes"] == 4 and info["mean_bytes"] > 0


def test_make_folder_is_deterministic_per_seed(tmp_path):
    a = B.make_folder(str(tmp_path / "a"), 6, seed=7, classes=2, min_side=32, max_side=64, workers=1)
    b = B.make_folder(str(tmp_path / "b"), 6, seed=7, classes=2, min_side=32, max_side=64, workers=2)
    c = B.make_folder(str(tmp_path / "c"), 6, seed=8, classes=2, min_side=32, max_side=64, workers=1)
    fa, fb, fc = _files(a), _files(b), _files(c)
    rel = [os.path.relpath(f, a) for f in fa]
    assert rel == [os.path.relpath(f, b) for f in fb] == [os.path.relpath(f, c) for f in fc]
    assert all(open(x, "rb").read() == open(y, "rb").read() for x, y in zip(fa, fb))
    assert sum(open(x, "rb").read() != open(y, "rb").read() for x, y in zip(fa, fc)) == len(fa)


def test_default_images_are_imagenet_like():
    """At the default sizes the images are about 300-640 px and encode to ~50 KB (quality 90)."""
    import io

    from PIL import Image

    sizes, shapes = [], []
    for i in range(6):
        a = B.synth_image(i, seed=0)
        shapes.append(a.shape)
        buf = io.BytesIO()
        Image.fromarray(a).save(buf, "JPEG", quality=90)
        sizes.append(len(buf.getvalue()))
    assert all(300 <= s <= 640 for sh in shapes for s in sh[:2]) and all(sh[2] == 3 for sh in shapes)
    assert 20e3 < np.mean(sizes) < 120e3, sizes


def test_synthetic_folder_is_cached(tmp_path):
    kw = dict(seed=1, classes=2, min_side=32, max_side=48, cache=str(tmp_path), workers=1)
    root = B.synthetic_folder(4, **kw)
    stamp = [os.stat(f).st_mtime_ns for f in _files(root)]
    assert len(stamp) == 4 and os.path.dirname(root) == str(tmp_path)
    assert B.synthetic_folder(4, **kw) == root
    assert [os.stat(f).st_mtime_ns for f in _files(root)] == stamp  # not written again
    assert [d for d in os.listdir(tmp_path) if ".tmp-" in d] == []  # no half-written folder left
    assert B.synthetic_folder(5, **kw) != root


@pytest.mark.parametrize("bad", [dict(n=0), dict(n=4, classes=5), dict(n=4, min_side=50, max_side=40)])
def test_make_folder_bad_arguments(tmp_path, bad):
    bad.setdefault("n", 4)
    n = bad.pop("n")
    with pytest.raises(ValueError, match=r"n:|classes:|min_side"):
        B.make_folder(str(tmp_path), n, **bad)


# -- meters ---------------------------------------------------------------------------------


def _spin(cpu_seconds, then_sleep=0.0):
    """Burn ``cpu_seconds`` of this process's CPU time (not wall time: the CI machine is shared)."""
    t = time.process_time()
    while time.process_time() - t < cpu_seconds:
        pass
    time.sleep(then_sleep)


@pytest.mark.parametrize("alive_at_stop", [False, True])
def test_cpu_meter_counts_children(alive_at_stop):
    """A child burning 0.4 s of CPU: counted once it has ended (os.times) or while it still
    lives (/proc), and this process's own sleeping adds nearly nothing."""
    meter = B.CpuMeter().start()
    p = mp.get_context("fork").Process(target=_spin, args=(0.4, 5.0 if alive_at_stop else 0.0))
    p.start()
    if alive_at_stop:
        deadline = time.monotonic() + 30
        while B._proc_tree_cpu().get(p.pid, 0.0) < 0.35 and time.monotonic() < deadline:
            time.sleep(0.05)
        used = meter.stop()
        p.kill()
        p.join()
    else:
        p.join()
        used = meter.stop()
    assert 0.33 <= used <= 0.4 + 0.25, used  # /proc counts in clock ticks (0.01 s)


def test_cpu_meter_counts_this_process():
    meter = B.CpuMeter().start()
    _spin(0.3)
    assert 0.28 <= meter.stop() <= 0.6


def test_gpu_busy_sampler():
    """With NVML or nvidia-smi: a mean utilisation in [0, 100]; with neither (CI): None."""
    import shutil

    busy = B.GpuBusy(index=0, period=0.05).start()
    time.sleep(0.3)
    v = busy.stop()
    if busy.source is None:
        assert v is None and shutil.which("nvidia-smi") is None
    else:
        assert v is None or 0.0 <= v <= 100.0


def test_measure_counts_batches_and_waits():
    class Slow:
        notes = []

        def epoch(self):
            for _ in range(3):
                time.sleep(0.02)
                yield (np.zeros((4, 3)), np.zeros(4))

        def sync(self, b):
            pass

        def count(self, b):
            return len(b[0])

    res = B.measure(Slow(), epochs=2, warmup_epochs=1, min_seconds=0.0)
    assert res["batches"] == 6 and res["images"] == 24 and res["epochs"] == 2
    assert 15 <= res["wait_ms"] <= 200 and 50 <= res["wait_pct"] <= 100.01
    assert abs(res["images_per_s"] - 24 / res["seconds"]) < 1e-6


# -- the benchmark in dry-run mode ------------------------------------------------------------


@pytest.fixture(scope="module")
def dry_doc(tmp_path_factory):
    pytest.importorskip("nvidia.dali")
    cache = tmp_path_factory.mktemp("cache")
    return B.run(images=16, batch=4, workers=2, epochs=1, warmup_epochs=1, min_seconds=0.0, dry_run=True,
                 size=32, cache=str(cache), log=lambda m: None)


def test_dry_run_rows(dry_doc):
    rows = {r["path"]: r for r in dry_doc["rows"]}
    assert list(rows) == list(B.PATHS)
    import inspect

    from gpuaug.scheduler import ImageFiles

    has_decode = "decode" in inspect.signature(ImageFiles).parameters
    for name in ("dali", "gpuaug_dali_rrc", "gpuaug_dali", "scheduler_cpu", "scheduler_cpu_threads"):
        r = rows[name]
        if name.startswith("scheduler") and not has_decode:  # an older gpuaug: the row says why
            assert r["status"].startswith("unavailable: gpuaug.scheduler.ImageFolder does not take"), r
            continue
        assert r["status"] == "ok", r
        assert r["images"] == r["batches"] * 4 and r["batches"] >= 4  # 16 images, batch 4, >= 1 epoch
        assert r["images_per_s"] > 0 and r["cpu_cores"] >= 0 and r["wait_ms"] > 0
        assert r["gpu_busy_pct"] is None  # no GPU
    assert rows["scheduler_gpu"]["status"].startswith("unavailable: dry run")
    try:
        import torch  # noqa: F401
        import torchvision  # noqa: F401

        assert rows["torchvision"]["status"] == "ok"
    except ImportError:
        assert rows["torchvision"]["status"].startswith("unavailable: ")
    assert rows["dali"]["vs_dali"] == 1.0
    assert dry_doc["folder"]["images"] == 16 and dry_doc["config"]["dry_run"] is True


def test_dry_run_schema_and_files(dry_doc, tmp_path):
    assert dry_doc["schema"] == B.SCHEMA
    assert B.validate(dry_doc) == []
    broken = json.loads(json.dumps(dry_doc))
    broken["rows"][0]["images_per_s"] = -1.0
    del broken["rows"][1]["wait_ms"]
    probs = B.validate(broken)
    assert any("images_per_s" in p for p in probs) and any("missing wait_ms" in p for p in probs)
    jp, mp_, pp = B.write(dry_doc, str(tmp_path / "out"))
    with open(jp) as f:
        back = json.load(f)
    assert back["rows"] == json.loads(json.dumps(dry_doc["rows"]))
    table = open(mp_).read()
    assert table.count("\n| ") == len(B.PATHS) + 1 and "unavailable" in table
    with open(pp, "rb") as f:
        assert f.read(8) == b"\x89PNG\r\n\x1a\n"
    assert os.path.getsize(pp) > 5000


def test_cli_dry_run(tmp_path, capsys):
    pytest.importorskip("nvidia.dali")
    from gpuaug.cli import main

    os.environ["GPUAUG_CACHE"] = str(tmp_path / "cache")
    try:
        rc = main(["bench", "--e2e", "--dry-run", "--images", "8", "--batch", "4", "--size", "24x24",
                   "--paths", "dali,gpuaug_dali_rrc", "--out", str(tmp_path / "out")])
    finally:
        del os.environ["GPUAUG_CACHE"]
    out = capsys.readouterr().out
    assert rc == 0, out
    doc = json.load(open(tmp_path / "out" / "e2e.json"))
    assert [r["path"] for r in doc["rows"]] == ["dali", "gpuaug_dali_rrc"]
    assert all(r["status"] == "ok" for r in doc["rows"]) and doc["config"]["size"] == 24
    assert "wrote" in out and (tmp_path / "out" / "e2e.png").exists()


def test_cli_bad_path_name(tmp_path, capsys):
    from gpuaug.cli import main

    rc = main(["bench", "--e2e", str(tmp_path), "--dry-run", "--paths", "nope"])
    assert rc == 2 and "paths" in capsys.readouterr().err


# -- gpuaug.dali.image_folder_pipeline on the CPU ---------------------------------------------


def _square_tree(root, classes=2, per_class=8, side=24, seed=0):
    from PIL import Image

    rng = np.random.default_rng(seed)
    for c in range(classes):
        d = root / f"c{c}"
        d.mkdir(parents=True)
        for i in range(per_class):
            # smooth content (JPEG keeps it close) that is not left-right symmetric
            y, x = np.mgrid[0:side, 0:side]
            a = np.stack([x * 9 + rng.integers(0, 40), y * 5 + c * 60, (x * y) % 200], -1)
            Image.fromarray(np.clip(a, 0, 255).astype(np.uint8)).save(d / f"{i}.jpg", quality=95)
    return root


def _pil(root):
    from PIL import Image

    return {f: np.asarray(Image.open(f).convert("RGB"), np.float64) for f in _files(root)}


def _unnormalize(x):
    """(3, h, w) float32 normalised with ImageNet's uint8-unit mean/std -> (h, w, 3) uint8 units."""
    from gpuaug.dali.pipelines import IMAGENET_MEAN, IMAGENET_STD

    return x.transpose(1, 2, 0) * np.array(IMAGENET_STD) + np.array(IMAGENET_MEAN)


@pytest.mark.parametrize("roi", ["dali", "gpuaug"])
def test_training_pipeline_flip_cpu(tmp_path, roi):
    """augment="flip", crops of the whole (square) image resized to its own size: every output
    is the decoded image or its mirror (the flip folded into crop_mirror_normalize), both seen,
    whichever decoder draws the boxes (roi)."""
    pytest.importorskip("nvidia.dali")
    import gpuaug.dali as gd

    root = _square_tree(tmp_path / "imgs")
    refs = list(_pil(root).values())
    pipe = gd.image_folder_pipeline(str(root), "flip", size=24, batch_size=8, device_id=None, num_threads=1,
                                    seed=5, scale=(1.0, 1.0), ratio=(1.0, 1.0), roi=roi)
    pipe.build()
    kinds = []
    for _ in range(4):
        images, labels = pipe.run()
        assert images.layout() == "CHW"
        for t in images:
            x = _unnormalize(np.array(t))
            d_plain = min(np.abs(x - r).max() for r in refs)
            d_flip = min(np.abs(x - r[:, ::-1]).max() for r in refs)
            assert min(d_plain, d_flip) <= 3.0, (d_plain, d_flip)
            kinds.append(d_flip < d_plain)
        assert set(np.concatenate([np.array(t) for t in labels]).tolist()) <= {0, 1}
    assert 0 < sum(kinds) < len(kinds)  # 32 coin flips: both sides seen
    del pipe


def test_validation_pipeline_decodes_the_centre_box(tmp_path):
    """The centre box (floor of crop_pct * shorter side, corner floored) decoded by the ROI
    decoder and resized to its own size equals PIL's decode of the same box."""
    pytest.importorskip("nvidia.dali")
    from PIL import Image

    import gpuaug.dali as gd

    root = tmp_path / "imgs"
    (root / "a").mkdir(parents=True)
    rng = np.random.default_rng(1)
    y, x = np.mgrid[0:30, 0:44]
    for i in range(4):
        a = np.stack([x * 5 + i * 20, y * 7, (x + y) * 3], -1) + rng.integers(0, 4, (30, 44, 3))
        Image.fromarray(np.clip(a, 0, 255).astype(np.uint8)).save(root / "a" / f"{i}.jpg", quality=95)
    # side = floor(0.5 * 30) = 15; top = floor((30 - 15) / 2) = 7; left = floor((44 - 15) / 2) = 14
    pipe = gd.validation_pipeline(str(root), size=15, batch_size=4, device_id=None, num_threads=1,
                                  crop_pct=0.5)
    pipe.build()
    images, _ = pipe.run()
    refs = [v[7:22, 14:29] for v in _pil(root).values()]
    for t, r in zip(images, refs):  # files in order (no shuffle in validation)
        got = _unnormalize(np.array(t))
        assert got.shape == (15, 15, 3)
        assert np.abs(got - r).max() <= 3.0
    del pipe


def test_pipeline_seed_default_is_none_no_deprecation(tmp_path):
    pytest.importorskip("nvidia.dali")
    import inspect

    import gpuaug.dali as gd

    assert inspect.signature(gd.image_folder_pipeline).parameters["seed"].default is None
    root = _square_tree(tmp_path / "imgs", per_class=2)
    for seed in (None, -1):
        with warnings.catch_warnings(record=True) as w:
            warnings.simplefilter("always")
            pipe = gd.image_folder_pipeline(str(root), "flip", size=16, batch_size=2, device_id=None,
                                            num_threads=1, seed=seed)
            pipe.build()
            pipe.run()
        assert not [x for x in w if "seed" in str(x.message).lower()], [str(x.message) for x in w]
        del pipe
    with pytest.raises(ValueError, match="interpolation"):
        gd.image_folder_pipeline(str(root), size=16, batch_size=2, device_id=None, interpolation="cubic")


def test_pipeline_roi_choices(tmp_path):
    pytest.importorskip("nvidia.dali")
    import gpuaug.dali as gd

    root = _square_tree(tmp_path / "imgs", per_class=2)
    with pytest.raises(ValueError, match="roi: got 'nvjpeg'"):
        gd.image_folder_pipeline(str(root), size=16, batch_size=2, device_id=None, roi="nvjpeg")
    for roi in ("dali", "gpuaug"):  # random crops of any size come out at the requested size
        pipe = gd.image_folder_pipeline(str(root), "flip", size=(12, 16), batch_size=4, device_id=None,
                                        num_threads=1, seed=1, roi=roi)
        pipe.build()
        images, _ = pipe.run()
        assert [tuple(np.array(t).shape) for t in images] == [(3, 12, 16)] * 4
        del pipe
