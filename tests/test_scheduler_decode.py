"""The scheduler's image-file paths on the CPU (FakeDevice): CPU decode on threads, decode in
worker processes, the GPU-decode plumbing (FakeDevice decodes with Pillow in place of
nvImageCodec, then the real resized_crop CPU twin), bad files (raise naming the file / skip
and count), the pixel limit, and the in-memory staging path (bytes intact, in order)."""
from __future__ import annotations

import io
import os
import struct
import sys
import warnings
import zlib

import numpy as np
import pytest
from PIL import Image

import gpuaug
from gpuaug.scheduler import FakeDevice, ImageFiles, ImageFolder, Scheduler
from gpuaug.scheduler import _decode as D
from gpuaug.scheduler import sources as S


def collect(sched):
    return [(np.array(x) if not isinstance(x, list) else [np.array(a) for a in x],
             None if lab is None else np.asarray(lab)) for x, lab in sched]


def pil_decode(path, size=None, mode="RGB"):
    """Independent reference: Pillow alone (draft-mode DCT downscale, then bilinear)."""
    with Image.open(path) as im:
        if size is not None:
            im.draft(mode if mode in ("RGB", "L") else None, (size[1], size[0]))
        im = im.convert(mode)
        if size is not None and im.size != (size[1], size[0]):
            im = im.resize((size[1], size[0]), Image.BILINEAR)
        a = np.asarray(im)
    return a[..., None] if a.ndim == 2 else a


def _photo(rng, h, w):
    # smooth content (a photo-like JPEG), not noise
    small = rng.integers(0, 256, (max(2, h // 16), max(2, w // 16), 3), dtype=np.uint8)
    return np.asarray(Image.fromarray(small).resize((w, h), Image.BILINEAR))


@pytest.fixture(scope="module")
def folder(tmp_path_factory):
    """root/<class>/*.jpg|png of mixed sizes; returns (root, files, labels)."""
    root = tmp_path_factory.mktemp("folder")
    rng = np.random.default_rng(0)
    files, labels = [], []
    for ci, c in enumerate(["ant", "bee", "cat"]):
        (root / c).mkdir()
        for i in range(7):
            h, w = int(rng.integers(40, 90)), int(rng.integers(40, 90))
            ext = ".png" if i % 3 == 2 else ".jpg"
            p = root / c / f"{i:02d}{ext}"
            kw = {"quality": 88, "progressive": bool(i % 2)} if ext == ".jpg" else {}
            Image.fromarray(_photo(rng, h, w)).save(p, **kw)
            files.append(str(p))
            labels.append(ci)
    return root, files, labels


# --------------------------------------------------------------------------------------
# CPU decode: threads and processes, counted and checksummed against Pillow
# --------------------------------------------------------------------------------------
@pytest.mark.parametrize("decode", ["cpu", "process"])
@pytest.mark.parametrize("size", [(24, 32), None])
def test_folder_decode_matches_pillow(folder, decode, size):
    root, files, labels = folder
    src = ImageFolder(root, size=size, decode=decode, processes=2 if decode == "process" else None)
    dev = FakeDevice()
    aug = None if size is not None else (lambda xs: [a.copy() for a in xs])
    got = collect(Scheduler(src, aug, batch_size=5, workers=3, device=dev))
    assert [len(lab) for _, lab in got] == [5, 5, 5, 5, 1]
    imgs = [a for x, _ in got for a in x]
    assert len(imgs) == len(files) == 21
    np.testing.assert_array_equal(np.concatenate([lab for _, lab in got]), labels)
    want = [pil_decode(f, size) for f in files]
    for a, w, f in zip(imgs, want, files):
        assert a.shape == w.shape, f
        d = np.abs(a.astype(int) - w)
        # with a size, simplejpeg decodes at the smallest libjpeg-turbo scale M/8 >= size where
        # Pillow's draft mode only has 1/2, 1/4, 1/8: different intermediate images before the
        # same bilinear resize; full-size decodes are identical
        assert d.mean() <= (6 if size else 0), f
    if size is None:  # checksum of the whole epoch against Pillow's
        assert zlib.crc32(b"".join(a.tobytes() for a in imgs)) == zlib.crc32(b"".join(w.tobytes() for w in want))
    if decode == "process":
        src.close()
    assert not dev.errors


def test_without_simplejpeg_the_resized_decode_is_pillows_exactly(folder, monkeypatch):
    root, files, labels = folder
    monkeypatch.setattr(D, "_simplejpeg", lambda: None)
    got = collect(Scheduler(ImageFolder(root, size=(24, 32)), None, batch_size=8, workers=2, device=FakeDevice()))
    imgs = np.concatenate([x for x, _ in got])
    np.testing.assert_array_equal(imgs, np.stack([pil_decode(f, (24, 32)) for f in files]))


def test_process_decode_shuffled_order_and_reuse(folder):
    root, files, labels = folder
    src = ImageFolder(root, size=(16, 16), decode="process", processes=2)
    sched = Scheduler(src, None, batch_size=4, workers=2, shuffle=True, seed=3, device=FakeDevice())
    for epoch in range(2):  # the pool is kept between epochs
        order = np.concatenate(gpuaug.scheduler.epoch_batches(len(files), 4, epoch=epoch, shuffle=True, seed=3))
        got = collect(sched)
        np.testing.assert_array_equal(np.concatenate([lab for _, lab in got]), np.asarray(labels)[order])
        for a, i in zip([a for x, _ in got for a in x], order):  # the processes run the thread path's decoder
            np.testing.assert_array_equal(a, S.decode_image(files[i], (16, 16)))
    assert src._proc is not None and src._proc.processes == 2
    src.close()


def test_dead_decoding_process_fails_its_batch_then_the_pool_restarts(folder, monkeypatch):
    root, files, _ = folder
    real = D.decode_file

    def crashing(path, *a, **k):  # the forked children inherit this
        if path.endswith(os.path.join("bee", "00.jpg")):
            os._exit(3)
        return real(path, *a, **k)

    monkeypatch.setattr(D, "decode_file", crashing)
    src = ImageFolder(root, size=(8, 8), decode="process", processes=2)
    with pytest.raises(RuntimeError, match=r"a decoding process died while decoding one of .*bee.00\.jpg"):
        collect(Scheduler(src, None, batch_size=4, workers=2, device=FakeDevice()))
    monkeypatch.setattr(D, "decode_file", real)
    got = collect(Scheduler(src, None, batch_size=4, workers=2, device=FakeDevice()))
    assert sum(len(x) for x, _ in got) == len(files)
    src.close()


def test_process_count_defaults_to_workers(folder):
    src = ImageFolder(folder[0], size=(8, 8), decode="process")
    Scheduler(src, None, batch_size=4, workers=3, device=FakeDevice())
    assert src._workers == 3


# --------------------------------------------------------------------------------------
# GPU decode plumbing (FakeDevice stands in for nvImageCodec)
# --------------------------------------------------------------------------------------
@pytest.fixture
def no_nvimgcodec_check(monkeypatch):
    monkeypatch.setattr(S, "nvimgcodec_module", lambda: None)


@pytest.mark.parametrize("crop", [None, "random"])
def test_gpu_decode_path_resized_crop(folder, no_nvimgcodec_check, crop):
    root, files, labels = folder
    size = (20, 24)
    src = ImageFolder(root, size=size, decode="gpu", crop=crop, seed=11)
    dev = FakeDevice()
    got = collect(Scheduler(src, None, batch_size=8, workers=2, device=dev))
    assert [x.shape for x, _ in got] == [(8, 20, 24, 3), (8, 20, 24, 3), (5, 20, 24, 3)]
    np.testing.assert_array_equal(np.concatenate([lab for _, lab in got]), labels)
    assert dev.decoded == len(files)
    rng = np.random.default_rng(11)
    for b, (x, _) in enumerate(got):
        full = [pil_decode(f) for f in files[8 * b:8 * b + 8]]
        sizes = np.asarray([a.shape[:2] for a in full])
        if crop == "random":
            boxes = gpuaug.random.resized_crop_boxes(rng, sizes)
        else:
            boxes = np.concatenate([np.zeros_like(sizes), sizes], axis=1)
        want = gpuaug.resized_crop(full, boxes.astype(np.float32), size)
        np.testing.assert_array_equal(x, np.stack(want))
    assert not dev.errors


def test_gpu_decode_roi_decodes_the_crop_box_only(folder, no_nvimgcodec_check):
    root, files, labels = folder
    size = (12, 14)
    src = ImageFolder(root, size=size, decode="gpu", crop="random", roi=True, seed=4)
    got = collect(Scheduler(src, None, batch_size=8, workers=2, device=FakeDevice()))
    rng = np.random.default_rng(4)
    for b, (x, _) in enumerate(got):
        full = [pil_decode(f) for f in files[8 * b:8 * b + 8]]
        boxes = gpuaug.random.resized_crop_boxes(rng, np.asarray([a.shape[:2] for a in full]))
        crops = [a[t:t + h, l:l + w] for a, (t, l, h, w) in zip(full, boxes)]
        want = gpuaug.resized_crop(crops, [[0, 0, c.shape[0], c.shape[1]] for c in crops], size)
        np.testing.assert_array_equal(x, np.stack(want))
    with pytest.raises(ValueError, match="roi: got True with crop=None"):
        ImageFolder(root, size=size, decode="gpu", roi=True)


def test_gpu_decode_reads_and_decodes_at_most_depth_batches_ahead(folder, no_nvimgcodec_check, monkeypatch):
    root, files, _ = folder
    src = ImageFolder(root, size=(8, 8), decode="gpu")
    reads = []
    real = src.read_encoded
    monkeypatch.setattr(src, "read_encoded", lambda idx: (reads.append(int(idx[0])), real(idx))[1])
    sched = Scheduler(src, None, batch_size=2, workers=2, depth=2, device=FakeDevice())
    it = iter(sched)
    next(it)
    import time

    time.sleep(0.3)  # let the workers run ahead as far as they may
    # batch 0 held: augments 0, 1 done (2 needs 0 back), decodes up to 1 + depth, reads up to 1 + 2 * depth
    assert max(reads) // 2 == 1 + 2 * 2
    assert sum(len(x) for x, _ in [next(it)] + list(it)) == len(files) - 2


def test_gpu_decode_varshape_goes_to_the_augment(folder, no_nvimgcodec_check):
    root, files, _ = folder
    seen = []

    def aug(xs):
        seen.append(len(xs))
        return np.stack(gpuaug.resized_crop(xs, [0, 0, 10, 10], (10, 10)))

    got = collect(Scheduler(ImageFolder(root, decode="gpu"), aug, batch_size=10, device=FakeDevice()))
    assert seen == [10, 10, 1] and got[0][0].shape == (10, 10, 10, 3)
    np.testing.assert_array_equal(got[2][0][0], pil_decode(files[20])[:10, :10])


def test_nvimgcodec_decoder_api_on_its_cpu_backend():
    """The decode parameters gpuaug passes are accepted by the installed nvImageCodec, and
    unparsable or truncated streams come back as None (its CPU backend: no GPU here)."""
    nv = pytest.importorskip("nvidia.nvimgcodec")
    dec = D.GpuDecoder.__new__(D.GpuDecoder)
    try:
        dec.decoder = nv.Decoder(device_id=nv.NVIMGCODEC_DEVICE_CPU_ONLY, backends=[nv.Backend(nv.BackendKind.CPU_ONLY)])
    except Exception as e:  # noqa: BLE001
        pytest.skip(f"nvImageCodec's CPU backend is not usable here ({e})")
    good = _jpeg_bytes(np.random.default_rng(0), 40, 56)
    ref = np.asarray(Image.open(io.BytesIO(good)).convert("RGB"))
    for mode in ("RGB", "L"):
        # the constructor's parameters, without its GPU decoder
        real = nv.Decoder
        try:
            nv.Decoder = lambda **kw: None
            params = D.GpuDecoder(0, mode).params
        finally:
            nv.Decoder = real
        dec.nv, dec.params = nv, params
        out = dec.decode([good, good[:200], b"\xff\xd8junk" * 3], 0)
        assert out[1] is None and out[2] is None
        img = np.asarray(out[0].cpu())
        assert img.shape == (40, 56, 3 if mode == "RGB" else 1)
        if mode == "RGB":
            assert np.abs(img.astype(int) - ref).max() <= 1
            roi = dec.decode([good], 0, regions=[(8, 16, 24, 32)])[0]
            assert roi is not None
            part = np.asarray(roi.cpu())
            assert part.shape == (24, 32, 3)
            # libjpeg-turbo's crop decode upsamples chroma at the region's edge from its own MCUs
            assert np.abs(part.astype(int) - ref[8:32, 16:48]).mean() <= 1.0


def test_missing_nvimgcodec_names_the_extra(folder, monkeypatch):
    monkeypatch.setitem(sys.modules, "nvidia.nvimgcodec", None)
    with pytest.raises(ImportError, match=r"gpuaug\[gpu-decode12\]"):
        ImageFolder(folder[0], size=(8, 8), decode="gpu")


# --------------------------------------------------------------------------------------
# Bad files
# --------------------------------------------------------------------------------------
def _png_header(w, h):
    sig = b"\x89PNG\r\n\x1a\n"
    ihdr = struct.pack(">IIBBBBB", w, h, 8, 2, 0, 0, 0)
    chunk = struct.pack(">I", len(ihdr)) + b"IHDR" + ihdr + struct.pack(">I", zlib.crc32(b"IHDR" + ihdr))
    return sig + chunk + b"\x00" * 16


def _jpeg_bytes(rng, h=48, w=40):
    b = io.BytesIO()
    Image.fromarray(_photo(rng, h, w)).save(b, "JPEG", quality=90)
    return b.getvalue()


def _bomb_jpeg(rng):
    d = bytearray(_jpeg_bytes(rng))
    i = d.index(b"\xff\xc0")
    d[i + 5:i + 9] = struct.pack(">HH", 30000, 30000)
    return bytes(d)


BAD = {
    "truncated.jpg": lambda rng: _jpeg_bytes(rng)[:300],
    "garbage.jpg": lambda rng: b"\xff\xd8" + rng.integers(0, 256, 2000, dtype=np.uint8).tobytes(),
    "empty.jpg": lambda rng: b"",
    "text.png": lambda rng: b"this is not an image\n" * 20,
    "bomb.png": lambda rng: _png_header(30000, 30000),
    "bomb.jpg": _bomb_jpeg,
}


@pytest.fixture
def bad_folder(tmp_path):
    """root/a/ holds good JPEGs g00..g05 and one bad file per kind; returns (root, good files)."""
    rng = np.random.default_rng(5)
    (tmp_path / "a").mkdir()
    good = []
    for i in range(6):
        p = tmp_path / "a" / f"g{i:02d}.jpg"
        p.write_bytes(_jpeg_bytes(rng))
        good.append(str(p))
    return tmp_path, good, rng


@pytest.mark.parametrize("decode", ["cpu", "process", "gpu"])
@pytest.mark.parametrize("size", [(16, 16), None])
@pytest.mark.parametrize("bad", sorted(BAD))
def test_bad_file_raises_naming_the_file(bad_folder, no_nvimgcodec_check, decode, size, bad):
    root, good, rng = bad_folder
    path = root / "a" / ("h" + bad)  # sorts after the good files: batch 1
    path.write_bytes(BAD[bad](rng))
    src = ImageFolder(root, size=size, decode=decode, processes=1)
    sched = Scheduler(src, None if size else (lambda xs: [a.copy() for a in xs]), batch_size=4,
                      workers=2, device=FakeDevice())
    it = iter(sched)
    first = next(it)  # batch 0: good files only
    assert len(first[0]) == 4
    with pytest.raises(D.ImageDecodeError, match=str(path).replace("\\", "\\\\")) as ei:
        next(it)
    assert ei.value.path == str(path)
    if bad.startswith("bomb"):
        assert "30000x30000" in str(ei.value) and "max_pixels=67,108,864" in str(ei.value)
    src.close()
    sched.close()


@pytest.mark.parametrize("decode", ["cpu", "process", "gpu"])
@pytest.mark.parametrize("size", [(16, 16), None])
def test_bad_files_skipped_with_warning_and_count(bad_folder, no_nvimgcodec_check, decode, size):
    root, good, rng = bad_folder
    for name, make in BAD.items():
        (root / "a" / name).write_bytes(make(rng))
    src = ImageFolder(root, size=size, decode=decode, on_error="skip", processes=1)
    files = src.files
    assert len(files) == 12
    aug = None if size else (lambda xs: [a.copy() for a in xs])
    sched = Scheduler(src, aug, batch_size=4, workers=2, device=FakeDevice())
    with warnings.catch_warnings(record=True) as w:
        warnings.simplefilter("always")
        got = collect(sched)
    msgs = [str(x.message) for x in w if issubclass(x.category, RuntimeWarning)]
    bad_paths = sorted(str(root / "a" / n) for n in BAD)
    assert sorted(p for m in msgs for p in bad_paths if p in m) == bad_paths
    imgs = [a for x, _ in got for a in x]
    assert len(imgs) == 6 and sum(len(lab) for _, lab in got) == 6
    for a, f in zip(imgs, good):  # the good files, in order, none of them zero
        want = S.decode_image(f, size) if decode != "gpu" or size is None else gpuaug.resized_crop(
            [pil_decode(f)], [[0, 0, *pil_decode(f).shape[:2]]], size)[0]
        np.testing.assert_array_equal(a, want)
        assert a.any()
    assert sched.stats().skipped == 6
    assert sorted(p for p, _ in sched.skipped()) == bad_paths
    src.close()


def test_batch_with_every_sample_skipped_is_empty(tmp_path):
    rng = np.random.default_rng(0)
    (tmp_path / "a").mkdir()
    (tmp_path / "a" / "0.jpg").write_bytes(_jpeg_bytes(rng))
    (tmp_path / "a" / "1.jpg").write_bytes(b"")
    (tmp_path / "a" / "2.jpg").write_bytes(b"junk")
    src = ImageFolder(tmp_path, size=(8, 8), on_error="skip")
    with pytest.warns(RuntimeWarning, match="skipped"):
        got = collect(Scheduler(src, lambda x: x + 1, batch_size=1, device=FakeDevice()))
    assert [x.shape for x, _ in got] == [(1, 8, 8, 3), (0, 8, 8, 3), (0, 8, 8, 3)]
    assert [len(lab) for _, lab in got] == [1, 0, 0]


def test_pixel_limit_is_a_setting(tmp_path):
    rng = np.random.default_rng(0)
    (tmp_path / "a").mkdir()
    p = tmp_path / "a" / "x.jpg"
    p.write_bytes(_jpeg_bytes(rng, 48, 40))
    with pytest.raises(D.ImageDecodeError, match=r"x\.jpg: its header claims 40x48 = 1,920 pixels, over "
                                                 r"the limit max_pixels=1,000"):
        collect(Scheduler(ImageFolder(tmp_path, size=(8, 8), max_pixels=1000), None, batch_size=1,
                          device=FakeDevice()))
    # varshape: refused from the header, before any staging buffer is made
    dev = FakeDevice()
    with pytest.raises(D.ImageDecodeError, match="max_pixels=1,000"):
        collect(Scheduler(ImageFolder(tmp_path, max_pixels=1000), None, batch_size=1, device=dev))
    assert dev.pinned_allocs == 0
    assert collect(Scheduler(ImageFolder(tmp_path, size=(8, 8), max_pixels=None), None, batch_size=1,
                             device=FakeDevice()))[0][0].shape == (1, 8, 8, 3)
    assert D.DEFAULT_MAX_PIXELS == 2 ** 26
    for bad in (0, -1, 2.5, True, "10"):
        with pytest.raises(ValueError, match="max_pixels"):
            ImageFolder(tmp_path, max_pixels=bad)


def test_bomb_png_header_is_refused_before_pillow(tmp_path):
    p = tmp_path / "b.png"
    p.write_bytes(_png_header(13000, 13000))
    with pytest.raises(D.ImageDecodeError, match=r"b\.png: its header claims 13000x13000"):
        S.image_shape(p)
    with pytest.raises(D.ImageDecodeError, match=r"b\.png: its header claims 13000x13000"):
        S.decode_image(p, (8, 8))


@pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="needs os.mkfifo (POSIX)")
def test_fifo_is_not_listed_nor_opened(tmp_path):
    rng = np.random.default_rng(0)
    (tmp_path / "a").mkdir()
    (tmp_path / "a" / "0.jpg").write_bytes(_jpeg_bytes(rng))
    fifo = tmp_path / "a" / "pipe.png"
    os.mkfifo(fifo)
    (tmp_path / "a" / "dir.jpg").mkdir()
    assert ImageFolder(tmp_path).files == [str(tmp_path / "a" / "0.jpg")]
    with pytest.raises(D.ImageDecodeError, match="not a regular file"):
        collect(Scheduler(ImageFiles([fifo], size=(4, 4)), None, batch_size=1, device=FakeDevice()))
    with pytest.raises(D.ImageDecodeError, match="not a regular file"):
        S.image_shape(fifo)


def test_error_messages_name_the_file_for_decode_image(tmp_path):
    rng = np.random.default_rng(1)
    cases = {"t.jpg": _jpeg_bytes(rng)[:200], "z.jpg": b"", "n.png": b"nope" * 10}
    for name, data in cases.items():
        p = tmp_path / name
        p.write_bytes(data)
        with pytest.raises(D.ImageDecodeError) as ei:
            S.decode_image(p)
        assert str(ei.value).startswith(str(p) + ": ") and ei.value.path == str(p)
    with pytest.raises(D.ImageDecodeError, match="cannot stat"):
        S.decode_image(tmp_path / "missing.jpg")


def test_header_sizes_match_pillow(tmp_path):
    rng = np.random.default_rng(2)
    img = _photo(rng, 37, 53)
    for fmt, kw in (("JPEG", {}), ("JPEG", {"progressive": True}), ("PNG", {}), ("GIF", {}), ("BMP", {}),
                    ("WEBP", {}), ("TIFF", {})):
        b = io.BytesIO()
        Image.fromarray(img).save(b, fmt, **kw)
        assert D.header_size(b.getvalue()) == (37, 53), fmt


def test_source_argument_errors(tmp_path, folder, no_nvimgcodec_check):
    root = folder[0]
    for kw, err, match in (({"decode": "gpux"}, ValueError, "decode: got 'gpux'"),
                           ({"on_error": "ignore"}, ValueError, "on_error: got 'ignore'"),
                           ({"crop": "random"}, ValueError, "crop: got 'random' with decode='cpu'"),
                           ({"size": "ab"}, TypeError, "size: got 'ab'"),
                           ({"size": 3.5}, TypeError, "size: got 3.5"),
                           ({"size": (2.7, 3.9)}, TypeError, r"size: got \(2.7, 3.9\)"),
                           ({"processes": 0}, ValueError, "processes: got 0"),
                           ({"decode": "gpu", "mode": "RGBA"}, ValueError, "mode: got 'RGBA' with decode='gpu'"),
                           ({"extensions": [1]}, TypeError, "extensions")):
        with pytest.raises(err, match=match):
            ImageFolder(root, **kw)
    # extensions as one str is one ending, not its characters
    assert len(ImageFolder(root, extensions=".png").files) == 6
    with pytest.raises(TypeError, match="files: got a single path"):
        ImageFiles(str(root))


# --------------------------------------------------------------------------------------
# Issue 18 items 7 and the torch output
# --------------------------------------------------------------------------------------
@pytest.mark.parametrize("item, err", [(None, TypeError), ("abc", TypeError), ({"a": 1}, TypeError),
                                       (np.array(3), ValueError), (np.array(["x", "y"]), TypeError),
                                       ([np.zeros((2, 2, 3), np.uint8), None], TypeError)])
def test_iterable_source_items_are_checked(item, err):
    with pytest.raises(err, match="source: got"):
        collect(Scheduler(lambda: iter([item]), None, device=FakeDevice()))


def test_generator_source_second_epoch_warns():
    gen = (np.full((2, 2, 2, 1), i, np.uint8) for i in range(3))
    s = Scheduler(gen, None, device=FakeDevice())
    assert len(collect(s)) == 3
    with pytest.warns(RuntimeWarning, match="one-shot iterator"):
        assert collect(s) == []
    again = Scheduler(lambda: (np.zeros((2, 2, 2, 1), np.uint8) for _ in range(2)), None, device=FakeDevice())
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert len(collect(again)) == 2 and len(collect(again)) == 2


def test_string_labels_refused():
    with pytest.raises(TypeError, match="labels: got str"):
        Scheduler(np.zeros((10, 2, 2, 1), np.uint8), batch_size=2, labels="abcdefghij", device=FakeDevice())


@pytest.mark.parametrize("ret", [None, "abc", {"x": 1}, 5])
def test_augment_result_is_checked(ret):
    with pytest.raises(TypeError, match=f"augment: returned {type(ret).__name__}"):
        collect(Scheduler(np.zeros((4, 2, 2, 1), np.uint8), lambda x: ret, batch_size=2, device=FakeDevice()))


def test_torch_output_without_torch_raises(monkeypatch):
    import importlib.util

    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec", lambda name, *a: None if name == "torch" else real(name, *a))
    with pytest.raises(ImportError, match="PyTorch is not installed"):
        Scheduler(np.zeros((4, 2, 2, 1), np.uint8), batch_size=2, output="torch", device=FakeDevice())


# --------------------------------------------------------------------------------------
# In-memory staging: bytes intact, in order, in few large chunks
# --------------------------------------------------------------------------------------
@pytest.mark.parametrize("workers", [1, 3, 8])
@pytest.mark.parametrize("shuffle", [False, True])
def test_staging_delivers_every_byte_in_order(workers, shuffle):
    rng = np.random.default_rng(workers)
    x = rng.integers(0, 256, (96, 128, 128, 3), dtype=np.uint8)  # 48 KiB samples, 4.5 MiB batches of 96
    sched = Scheduler(x, None, batch_size=40, labels=np.arange(96), workers=workers, shuffle=shuffle, seed=1,
                      device=FakeDevice(h2d_gbps=20))
    got = collect(sched)
    order = np.concatenate([lab for _, lab in got])
    assert sorted(order.tolist()) == list(range(96))
    if not shuffle:
        assert order.tolist() == list(range(96))
    np.testing.assert_array_equal(np.concatenate([g for g, _ in got]), x[order])
    # one chunk per worker at most, each >= 4 MiB (a 40-sample batch is 1.9 MiB: one chunk)
    assert all(len(t.fill) == 1 for t in sched.timings())
    st = sched.stats()
    assert st.fill_gb_per_s > 0 and st.launch_mean_ms >= 0 and st.skipped == 0


def test_staging_chunks_split_large_batches_across_workers():
    x = np.random.default_rng(0).integers(0, 256, (64, 256, 256, 3), dtype=np.uint8)  # 12 MiB batches of 64
    sched = Scheduler(x, None, batch_size=64, workers=8, device=FakeDevice())
    got = collect(sched)
    np.testing.assert_array_equal(np.concatenate([g for g, _ in got]), x)
    assert [len(t.fill) for t in sched.timings()] == [3]  # 12 MiB // 4 MiB


# --------------------------------------------------------------------------------------
# decode="gpu", processes=N: the scheduler's side, with an in-process stand-in for the
# decoding processes (the same reads, checks and crop boxes; Pillow decodes). The processes
# themselves (nvImageCodec, CUDA IPC) run in the GPU tests.
# --------------------------------------------------------------------------------------
class FakeProcessDecoder:
    def __init__(self, src):
        self.src, self.ahead, self.jobs, self.pending_, self.drains = src, 3, [], {}, 0

    def drain(self, keep=None):
        self.drains += 1
        for key in [key for key in self.pending_ if keep is None or not keep(key)]:
            del self.pending_[key]

    def pending(self, key):
        return key in self.pending_

    def submit(self, key, paths, seed):
        assert key not in self.pending_
        self.jobs.append((key, list(paths), seed))
        self.pending_[key] = (list(paths), seed)

    def fetch(self, key, stream):
        paths, seed = self.pending_.pop(key)
        datas, where, errs = D.read_checked(paths, self.src.max_pixels)
        kept = []
        for j, d in zip(where, datas):
            try:
                kept.append(D.decode_bytes(d, None, "RGB", max_pixels=None))
            except D.ImageDecodeError:
                errs[j] = D.UNDECODABLE
        h, w = self.src.size
        if not kept:
            return np.zeros((0, h, w, 3), np.uint8), errs
        boxes = D.crop_boxes([a.shape[:2] for a in kept], seed, self.src.crop, self.src.scale, self.src.ratio)
        return np.stack(gpuaug.resized_crop(kept, boxes.astype(np.float32), (h, w))), errs

    def close(self):
        pass


@pytest.fixture
def process_decoder(monkeypatch, no_nvimgcodec_check):
    made = []

    def make(self, device_id):
        if self._gproc is None:
            self._gproc = FakeProcessDecoder(self)
            made.append(self._gproc)
        return self._gproc
    monkeypatch.setattr(ImageFiles, "gpu_process_decoder", make)
    return made


@pytest.mark.parametrize("crop", [None, "random"])
def test_gpu_decode_in_processes_batches_in_order(folder, process_decoder, crop):
    root, files, labels = folder
    size = (20, 24)
    src = ImageFolder(root, size=size, decode="gpu", crop=crop, gpu_processes=2, seed=5)
    reads = []
    monkeypatch_read = src.read_encoded
    src.read_encoded = lambda idx: (reads.append(idx), monkeypatch_read(idx))[1]
    got = collect(Scheduler(src, None, batch_size=8, workers=2, device=FakeDevice()))
    assert not reads  # the workers read nothing: the processes read the files
    assert [x.shape for x, _ in got] == [(8, 20, 24, 3), (8, 20, 24, 3), (5, 20, 24, 3)]
    np.testing.assert_array_equal(np.concatenate([lab for _, lab in got]), labels)
    (pd,) = process_decoder
    # each batch submitted once, in order; then the next epoch's first two (the window of 3)
    assert [k[1:] for k, _, _ in pd.jobs] == [(0, 0), (0, 1), (0, 2), (1, 0), (1, 1)]
    seeds = np.random.default_rng(5)
    for b, (x, _) in enumerate(got):
        _, paths, seed = pd.jobs[b]
        assert paths == files[8 * b:8 * b + 8] and seed == int(seeds.integers(2 ** 63))
        full = [pil_decode(f) for f in paths]
        sizes = np.asarray([a.shape[:2] for a in full])
        boxes = (gpuaug.random.resized_crop_boxes(np.random.default_rng(seed), sizes) if crop else
                 np.concatenate([np.zeros_like(sizes), sizes], axis=1))
        np.testing.assert_array_equal(x, np.stack(gpuaug.resized_crop(full, boxes.astype(np.float32), size)))


def _expected_batch(paths, seed, src):
    full = [pil_decode(f) for f in paths]
    boxes = D.crop_boxes([a.shape[:2] for a in full], seed, src.crop, src.scale, src.ratio)
    return np.stack(gpuaug.resized_crop(full, boxes.astype(np.float32), src.size))


def test_gpu_decode_in_processes_runs_on_into_the_next_epoch(folder, process_decoder):
    """Near an epoch's end the decoding window takes the next epoch's first batches (its
    shuffled order), which the next run fetches instead of submitting them again; the crop
    seeds keep their order; a run of another epoch (set_epoch) drops them."""
    root, files, labels = folder
    src = ImageFolder(root, size=(12, 10), decode="gpu", crop="random", gpu_processes=2, seed=7)
    sched = Scheduler(src, None, batch_size=4, workers=2, shuffle=True, seed=3, device=FakeDevice())
    seeds = np.random.default_rng(7)
    runs = []
    for epoch in (0, 1, 5):
        if epoch == 5:
            sched.set_epoch(5)
        order = epoch_batches_of(len(files), 4, epoch)
        got = collect(sched)
        runs.append(got)
        np.testing.assert_array_equal(np.concatenate([lab for _, lab in got]), np.asarray(labels)[np.concatenate(order)])
    (pd,) = process_decoder
    keys = [k[1:] for k, _, _ in pd.jobs]
    n = len(epoch_batches_of(len(files), 4, 0))
    # epoch 0's batches; while its last two are fetched, epoch 1's first two (a window of 3
    # from the batch fetched); the rest of epoch 1, epoch 2's first two (dropped: the next run
    # is epoch 5), epoch 5's, epoch 6's first two
    assert keys == ([(0, j) for j in range(n)] + [(1, j) for j in range(n)] + [(2, 0), (2, 1)]
                    + [(5, j) for j in range(n)] + [(6, 0), (6, 1)])
    assert pd.drains >= 3
    assert len(set(k for k, _, _ in pd.jobs)) == len(pd.jobs)
    for key, paths, seed in pd.jobs:  # seeds drawn in submission order
        assert seed == int(seeds.integers(2 ** 63))
        assert paths == [files[i] for i in epoch_batches_of(len(files), 4, key[1])[key[2]]]
    by_key = {k[1:]: (p, sd) for k, p, sd in pd.jobs}
    for epoch, got in zip((0, 1, 5), runs):
        for j, (x, _) in enumerate(got):
            np.testing.assert_array_equal(x, _expected_batch(*by_key[(epoch, j)], src))
    sched.close()


def epoch_batches_of(n, bs, epoch):
    return gpuaug.scheduler.epoch_batches(n, bs, epoch=epoch, shuffle=True, seed=3)


def test_gpu_decode_in_processes_skips_and_raises_bad_files(bad_folder, process_decoder):
    root, good, rng = bad_folder
    for name, make in BAD.items():
        (root / "a" / name).write_bytes(make(rng))
    src = ImageFolder(root, size=(16, 16), decode="gpu", on_error="skip", gpu_processes=1)
    sched = Scheduler(src, None, batch_size=4, workers=2, device=FakeDevice())
    with warnings.catch_warnings(record=True) as w:
        warnings.simplefilter("always")
        got = collect(sched)
    msgs = [str(x.message) for x in w if issubclass(x.category, RuntimeWarning)]
    bad_paths = sorted(str(root / "a" / n) for n in BAD)
    assert sorted(p for m in msgs for p in bad_paths if p in m) == bad_paths
    imgs = [a for x, _ in got for a in x]
    assert len(imgs) == 6 and sum(len(lab) for _, lab in got) == 6
    for a, f in zip(imgs, good):  # the good files, in order
        full = pil_decode(f)
        np.testing.assert_array_equal(a, gpuaug.resized_crop([full], [[0, 0, *full.shape[:2]]], (16, 16))[0])
    assert sched.stats().skipped == 6
    bad = root / "a" / "htruncated.jpg"
    for n in BAD:
        (root / "a" / n).unlink()
    bad.write_bytes(BAD["truncated.jpg"](rng))
    src = ImageFolder(root, size=(16, 16), decode="gpu", gpu_processes=1)
    it = iter(Scheduler(src, None, batch_size=4, workers=2, device=FakeDevice()))
    assert len(next(it)[0]) == 4
    with pytest.raises(D.ImageDecodeError, match=str(bad).replace("\\", "\\\\")):
        next(it)


def test_gpu_decode_in_processes_second_epoch_after_an_early_exit(folder, process_decoder):
    root, files, labels = folder
    src = ImageFolder(root, size=(8, 8), decode="gpu", gpu_processes=1)
    sched = Scheduler(src, None, batch_size=4, workers=2, device=FakeDevice())
    it = iter(sched)
    next(it)  # leave the epoch with batches in flight
    del it
    got = collect(sched)
    np.testing.assert_array_equal(np.concatenate([lab for _, lab in got]), labels)
    assert process_decoder[0].drains >= 1


def test_gpu_decode_processes_argument_checks(folder, no_nvimgcodec_check):
    root, _, _ = folder
    with pytest.raises(ValueError, match="gpu_processes: got 2 with decode='gpu', size=None"):
        ImageFolder(root, decode="gpu", gpu_processes=2)
    with pytest.raises(ValueError, match="gpu_processes: got 2 with decode='cpu'"):
        ImageFolder(root, size=(8, 8), gpu_processes=2)
    with pytest.raises(ValueError, match=r"gpu_processes: got 0; expected an int in \[1, 64\]"):
        ImageFolder(root, size=(8, 8), decode="gpu", gpu_processes=0)
    with pytest.raises(ValueError, match="roi: got True with gpu_processes"):
        ImageFolder(root, size=(8, 8), decode="gpu", crop="random", roi=True, gpu_processes=2)


@pytest.mark.gpu
def test_gpu_decode_in_processes_equals_in_process(folder):
    """The decoding processes (nvImageCodec + resized_crop, batches over CUDA IPC) give the same
    bits as decoding in this process."""
    pytest.importorskip("nvidia.nvimgcodec")
    cp = pytest.importorskip("cupy")
    root, files, labels = folder
    outs = []
    for procs in (None, 2):
        src = ImageFolder(root, size=(20, 24), decode="gpu", gpu_processes=procs)
        sched = Scheduler(src, None, batch_size=8, workers=2)
        try:
            for _ in range(2):  # a second epoch reuses the processes and their buffers
                got = [(cp.asnumpy(x), np.asarray(lab)) for x, lab in sched]
        finally:
            sched.close()
            src.close()
        outs.append(got)
    assert [x.shape for x, _ in outs[1]] == [(8, 20, 24, 3), (8, 20, 24, 3), (5, 20, 24, 3)]
    for (a, la), (b, lb) in zip(*outs):
        np.testing.assert_array_equal(a, b)
        np.testing.assert_array_equal(la, lb)


_TRACKER_SCRIPT = r"""
import sys
from multiprocessing import resource_tracker
import numpy as np
from PIL import Image
from gpuaug.scheduler import FakeDevice, ImageFolder, Scheduler

# a training process has usually started the tracker before (a spawn pool, a DataLoader): the
# forked decoding processes then share it
resource_tracker.ensure_running()
root = sys.argv[1]
rng = np.random.default_rng(0)
import os
os.makedirs(root + "/a", exist_ok=True)
for i in range(12):
    Image.fromarray(rng.integers(0, 256, (24, 20, 3), dtype=np.uint8)).save(f"{root}/a/{i:02d}.jpg")
src = ImageFolder(root, size=(16, 16), decode="process", processes=2)
sched = Scheduler(src, None, batch_size=4, workers=2, device=FakeDevice())
for _ in range(2):
    n = sum(len(x) for x, _ in sched)
sched.close()
src.close()
print("images", n)
"""


def test_process_decode_leaves_the_resource_tracker_quiet(tmp_path):
    """The decoding processes attach to the parent's shared memory without taking its entry out
    of the resource tracker they share with it: the parent's unlink left the tracker printing
    ``KeyError: '/psm_...'`` tracebacks (seen on the H200 with Python 3.12) - or, with a tracker
    of the child's own, the segment could be unlinked when a child exits."""
    import subprocess

    r = subprocess.run([sys.executable, "-c", _TRACKER_SCRIPT, str(tmp_path / "f")], capture_output=True,
                       text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    assert "images 12" in r.stdout
    assert "KeyError" not in r.stderr and "resource_tracker" not in r.stderr, r.stderr
