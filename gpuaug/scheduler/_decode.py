"""Image decoding for the scheduler's file sources: headers, CPU decode, worker processes, GPU decode.

- :func:`read_file` reads a file's bytes, refusing what is not a regular file (a FIFO would
  block ``open`` forever) and empty files;
- :func:`header_size` reads (height, width) from the first bytes of a JPEG, PNG, GIF, BMP
  or WebP without decoding (Pillow's lazy ``open`` for other formats), so the pixel limit
  is checked before anything is allocated;
- :func:`decode_bytes` decodes bytes to uint8 HWC: JPEGs through simplejpeg when it is
  installed (libjpeg-turbo with the GIL released, DCT-domain downscale to the smallest
  1/2, 1/4, 1/8 scale still >= ``size``), else Pillow (draft mode does the same downscale);
- :class:`ProcessDecoder`: a pool of worker processes that decode into shared memory, so
  decoding is not held by the parent's GIL;
- :func:`nvimgcodec_module` / :class:`GpuDecoder`: nvImageCodec's batched decoder into
  device memory (``pip install gpuaug[gpu-decode12]`` / ``[gpu-decode13]``).

Every failure is an :class:`ImageDecodeError` naming the file.
"""
from __future__ import annotations

import io
import os
import stat
import struct
import threading
import weakref

import numpy as np

#: default ``max_pixels`` of ImageFiles / ImageFolder: 2**26 = 67,108,864 pixels (8192 x 8192);
#: a header that claims more is refused before anything is allocated (decompression bombs)
DEFAULT_MAX_PIXELS = 1 << 26
ON_ERROR = ("raise", "skip")
DECODE = ("cpu", "process", "gpu")
_MODES = {"RGB": 3, "L": 1, "RGBA": 4}


class ImageDecodeError(ValueError):
    """A file that cannot be read or decoded (or whose header is over the pixel limit).

    ``path``: the file; ``reason``: what is wrong with it. The message starts with the path.
    """

    def __init__(self, path, reason):
        self.path, self.reason = path, reason
        super().__init__(f"{path}: {reason}")

    def __reduce__(self):  # survives the trip back from a worker process
        return (ImageDecodeError, (self.path, self.reason))


def _check_regular(path):
    """ImageDecodeError naming ``path`` unless it is a non-empty regular file (a FIFO would
    block a reader forever)."""
    try:
        st = os.stat(path)
    except OSError as e:
        raise ImageDecodeError(path, f"cannot stat it ({type(e).__name__}: {e})") from None
    if not stat.S_ISREG(st.st_mode):
        raise ImageDecodeError(path, "not a regular file (a FIFO, socket, device or directory); "
                                     "only regular image files are read")
    if st.st_size == 0:
        raise ImageDecodeError(path, "empty file (0 bytes)")
    return st


def read_file(path):
    """The bytes of ``path``; ImageDecodeError for a non-regular file, an empty file, an OSError."""
    _check_regular(path)
    try:
        with open(path, "rb") as f:
            data = f.read()
    except OSError as e:
        raise ImageDecodeError(path, f"cannot read it ({type(e).__name__}: {e})") from None
    if not data:
        raise ImageDecodeError(path, "empty file (0 bytes)")
    return data


def _jpeg_size(data):
    pos, n = 2, len(data)
    while pos + 4 <= n:
        if data[pos] != 0xFF:
            return None
        marker = data[pos + 1]
        if marker == 0xFF:  # fill byte
            pos += 1
            continue
        if marker in (0xD8, 0x01) or 0xD0 <= marker <= 0xD7:
            pos += 2
            continue
        (seg,) = struct.unpack(">H", data[pos + 2:pos + 4])
        if 0xC0 <= marker <= 0xCF and marker not in (0xC4, 0xC8, 0xCC):
            if pos + 9 > n:
                return None
            h, w = struct.unpack(">HH", data[pos + 5:pos + 9])
            return h, w
        if marker == 0xDA or seg < 2:  # scan before a frame header, or a broken length
            return None
        pos += 2 + seg
    return None


def header_size(data, path="<bytes>"):
    """(height, width) an image's header claims, without decoding; ImageDecodeError when
    the bytes are not a recognisable image."""
    if data[:2] == b"\xff\xd8":
        hw = _jpeg_size(data)
        if hw is None or min(hw) == 0:
            raise ImageDecodeError(path, "not a decodable JPEG (no frame header with a size; "
                                         "truncated or corrupt)")
        return hw
    if data[:8] == b"\x89PNG\r\n\x1a\n":
        if len(data) < 24 or data[12:16] != b"IHDR":
            raise ImageDecodeError(path, "not a decodable PNG (truncated or corrupt header)")
        w, h = struct.unpack(">II", data[16:24])
        return h, w
    if data[:6] in (b"GIF87a", b"GIF89a") and len(data) >= 10:
        w, h = struct.unpack("<HH", data[6:10])
        return h, w
    if data[:2] == b"BM" and len(data) >= 26:
        w, h = struct.unpack("<ii", data[18:26])
        return abs(h), abs(w)
    from PIL import Image

    try:
        with Image.open(io.BytesIO(data)) as im:
            w, h = im.size
    except Image.DecompressionBombError as e:
        raise ImageDecodeError(path, f"refused by Pillow's decompression bomb check ({e})") from None
    except Exception as e:  # noqa: BLE001 - any Pillow failure: not an image
        raise ImageDecodeError(path, f"not a recognisable image ({type(e).__name__}: {e})") from None
    return h, w


def check_pixels(hw, max_pixels, path):
    h, w = hw
    if max_pixels is not None and h * w > max_pixels:
        raise ImageDecodeError(path, f"its header claims {w}x{h} = {h * w:,} pixels, over the limit "
                                     f"max_pixels={max_pixels:,} (a decompression bomb?); pass a larger "
                                     "max_pixels (or None) to the source to accept it")


def _simplejpeg():
    try:
        import simplejpeg

        return simplejpeg
    except Exception:  # noqa: BLE001 - optional accelerator (pip install gpuaug[cpu-decode])
        return None


def decode_bytes(data, size=None, mode="RGB", path="<bytes>", max_pixels=DEFAULT_MAX_PIXELS):
    """Decode image bytes to a uint8 HWC array, resized to ``size`` (h, w) when given.

    The header is checked against ``max_pixels`` first. JPEGs: simplejpeg when installed
    (GIL released; DCT-domain downscale to the smallest scale M/8 that is still >= ``size``),
    else Pillow's draft mode (1/2, 1/4 or 1/8); then a bilinear resize.
    Any failure raises :class:`ImageDecodeError` naming ``path``.
    """
    from PIL import Image

    hw = header_size(data, path)
    check_pixels(hw, max_pixels, path)
    arr = None
    sj = _simplejpeg() if mode in ("RGB", "L") and data[:2] == b"\xff\xd8" else None
    if sj is not None:
        kw = {"min_height": size[0], "min_width": size[1]} if size else {}
        try:
            arr = sj.decode_jpeg(data, colorspace="GRAY" if mode == "L" else "RGB", strict=True, **kw)
        except Exception:  # noqa: BLE001 - CMYK, arithmetic coding...: Pillow decides below
            arr = None
    try:
        if arr is not None:
            if mode == "L" and arr.ndim == 3:
                arr = arr[..., 0]
            if size is not None and arr.shape[:2] != tuple(size):
                arr = np.asarray(Image.fromarray(arr).resize((size[1], size[0]), Image.BILINEAR))
        else:
            with Image.open(io.BytesIO(data)) as im:
                if size is not None:  # JPEG: decode at 1/2, 1/4 or 1/8 scale when that is still >= size
                    im.draft(mode if mode in ("RGB", "L") else None, (size[1], size[0]))
                im = im.convert(mode)
                if size is not None and im.size != (size[1], size[0]):
                    im = im.resize((size[1], size[0]), Image.BILINEAR)
                arr = np.asarray(im)
    except ImageDecodeError:
        raise
    except Exception as e:  # noqa: BLE001 - truncated, corrupt, unsupported: name the file
        raise ImageDecodeError(path, f"cannot decode it ({type(e).__name__}: {e})") from None
    if arr.ndim == 2:
        arr = arr[..., None]
    return arr


def decode_file(path, size=None, mode="RGB", max_pixels=DEFAULT_MAX_PIXELS):
    """:func:`decode_bytes` of a file's bytes (:func:`read_file`)."""
    return decode_bytes(read_file(path), size, mode, path, max_pixels)


def file_shape(path, mode="RGB", max_pixels=DEFAULT_MAX_PIXELS):
    """(h, w, c) a file decodes to without ``size``, from its header only (pixel limit checked)."""
    _check_regular(path)
    with open(path, "rb") as f:
        head = f.read(65536)
    try:
        hw = header_size(head, path)
    except ImageDecodeError:
        hw = header_size(read_file(path), path)  # a header past the first 64 KiB (big EXIF)
    check_pixels(hw, max_pixels, path)
    return (hw[0], hw[1], _MODES[mode])


# --------------------------------------------------------------------------------------
# Worker processes
# --------------------------------------------------------------------------------------
_child_shm = {}


def _attach_untracked(shared_memory, name):
    """The parent's segment ``name``, attached without telling the resource tracker: the parent
    owns (and unlinks) it. Python >= 3.13 says so with ``track=False``. Before it, attaching
    registers the name, and taking it out again is no answer: a forked child shares the
    parent's tracker (started before the fork by any spawn pool or DataLoader), so that took
    out the *parent's* entry, and the parent's unlink made the tracker print a
    ``KeyError: '/psm_...'`` traceback; with a tracker of the child's own, leaving it
    registered would unlink the segment when the child exits. So the child skips the
    registration (the decoding child runs one task at a time)."""
    try:
        return shared_memory.SharedMemory(name=name, track=False)
    except TypeError:
        pass
    from multiprocessing import resource_tracker

    register = resource_tracker.register
    resource_tracker.register = lambda n, rtype: None if rtype == "shared_memory" else register(n, rtype)
    try:
        return shared_memory.SharedMemory(name=name)
    finally:
        resource_tracker.register = register


def _child_decode(paths, size, mode, max_pixels, shm_name, offsets, shapes):
    """In a worker process: decode ``paths`` into the shared memory ``shm_name`` at
    ``offsets`` (expected ``shapes``); returns one error message (or None) per path."""
    from multiprocessing import shared_memory

    shm = _child_shm.get(shm_name)
    if shm is None:
        if len(_child_shm) > 64:  # the parent re-creates segments when they grow
            for old in _child_shm.values():
                old.close()
            _child_shm.clear()
        shm = _child_shm[shm_name] = _attach_untracked(shared_memory, shm_name)
    errs = []
    for p, off, sh in zip(paths, offsets, shapes):
        try:
            img = decode_file(p, size, mode, max_pixels)
            if img.shape != tuple(sh):
                raise ImageDecodeError(p, f"decoded to shape {img.shape}, but its header said {tuple(sh)}")
            np.copyto(np.ndarray(img.shape, np.uint8, shm.buf, off), img)
            errs.append(None)
        except ImageDecodeError as e:
            errs.append(e.reason)
        except Exception as e:  # noqa: BLE001 - reported to the parent with the file
            errs.append(f"cannot decode it ({type(e).__name__}: {e})")
    return errs


def _child_ping():
    return os.getpid()


class ProcessDecoder:
    """A pool of ``processes`` worker processes that decode files into shared memory. One per
    source; shut down when the source is garbage collected (or by :meth:`close`).

    Processes are forked where the OS can (as PyTorch's DataLoader does: spawned or
    forkserver children would re-run a training script that has no ``if __name__ ==
    "__main__"`` guard), all at once by :meth:`start`, which the scheduler calls before its
    own threads start; the children decode with Pillow / simplejpeg and never touch CUDA.
    A child that dies (a crashing decoder) fails its batch with a RuntimeError naming the
    files it held; the pool is restarted for the next batch.

    :meth:`decode_into` is called by the scheduler's worker threads; each thread owns a
    shared-memory segment the processes write into, then copies it to the pinned slot.
    """

    def __init__(self, processes):
        self.processes = int(processes)
        self._pool = None
        self._lock = threading.Lock()
        self._local = threading.local()
        self._segments = []
        self._finalizer = None

    def _ensure(self):
        with self._lock:
            if self._pool is None:
                import multiprocessing as mp
                from concurrent.futures import ProcessPoolExecutor

                method = "fork" if "fork" in mp.get_all_start_methods() else "spawn"
                self._pool = ProcessPoolExecutor(self.processes, mp_context=mp.get_context(method))
                self._finalizer = weakref.finalize(self, ProcessDecoder._shutdown, self._pool, self._segments)
            return self._pool

    def start(self):
        """Start every process now (a forked pool starts them all at its first task)."""
        pool = self._ensure()
        pool.submit(_child_ping).result()

    @staticmethod
    def _shutdown(pool, segments):
        pool.shutdown(wait=True, cancel_futures=True)
        for s in segments:
            try:
                s.close()
                s.unlink()
            except Exception:  # noqa: BLE001 - already gone
                pass
        segments.clear()

    def close(self):
        if self._finalizer is not None:
            self._finalizer()
        self._pool = None

    def _segment(self, nbytes):
        from multiprocessing import shared_memory

        seg = getattr(self._local, "seg", None)
        if seg is None or seg.size < nbytes:
            new = shared_memory.SharedMemory(create=True, size=max(int(nbytes), 1 << 20))
            with self._lock:
                self._segments.append(new)
                if seg is not None:
                    self._segments.remove(seg)
            if seg is not None:
                seg.close()
                seg.unlink()
            seg = self._local.seg = new
        return seg

    def decode_into(self, paths, outs, size, mode, max_pixels):
        """Decode ``paths`` into the arrays ``outs`` (their shapes are the expected ones);
        returns one error reason (or None) per path."""
        offs, pos = [], 0
        for o in outs:
            offs.append(pos)
            pos += (o.nbytes + 63) // 64 * 64
        seg = self._segment(pos)
        from concurrent.futures.process import BrokenProcessPool

        # A dying process breaks the whole pool: every batch in flight fails with it, not only
        # the one that killed it. So a batch retries once on a new pool; the batch whose file
        # kills its process fails twice and is the one reported.
        for attempt in (0, 1):
            pool = self._ensure()
            try:
                errs = pool.submit(_child_decode, list(paths), size, mode, max_pixels, seg.name, offs,
                                   [tuple(o.shape) for o in outs]).result()
                break
            except BrokenProcessPool as e:
                with self._lock:
                    if self._pool is pool:  # the next batch gets a new pool
                        self._pool = None
                        self._finalizer.detach()
                        pool.shutdown(wait=False, cancel_futures=True)
                if attempt:
                    raise RuntimeError(f"a decoding process died while decoding one of {list(paths)} "
                                       f"({type(e).__name__}: {e})") from None
        for o, off, err in zip(outs, offs, errs):
            if err is None:
                np.copyto(o, np.ndarray(o.shape, np.uint8, seg.buf, off))
        return errs


# --------------------------------------------------------------------------------------
# GPU decoding (nvImageCodec)
# --------------------------------------------------------------------------------------
def nvimgcodec_module():
    """``nvidia.nvimgcodec``, or ImportError naming the extra that installs it."""
    import importlib

    try:
        nvimgcodec = importlib.import_module("nvidia.nvimgcodec")
    except Exception as e:  # noqa: BLE001 - not installed, or its libraries missing
        raise ImportError(
            "decode='gpu' needs nvImageCodec: pip install 'gpuaug[gpu-decode12]' (CUDA 12, "
            "nvidia-nvimgcodec-cu12) or 'gpuaug[gpu-decode13]' (CUDA 13, nvidia-nvimgcodec-cu13) "
            f"({type(e).__name__}: {e})") from e
    return nvimgcodec


class GpuDecoder:
    """nvImageCodec's batched decoder on one device: :meth:`decode` turns a list of encoded
    images into device images (``__cuda_array_interface__``), ordered on ``cuda_stream``;
    None where an image failed to decode."""

    def __init__(self, device_id, mode="RGB"):
        nv = nvimgcodec_module()
        self.nv = nv
        self.decoder = nv.Decoder(device_id=int(device_id))
        self.supports_roi = hasattr(nv, "Region") and hasattr(nv.CodeStream, "get_sub_code_stream")
        cs = nv.ColorSpec
        rgb = getattr(cs, "SRGB", None) or getattr(cs, "RGB")
        color, fmt = {"RGB": (rgb, "I_RGB"), "L": (cs.GRAY, "I_Y")}[mode]
        kw = {"apply_exif_orientation": False, "color_spec": color}
        sf = getattr(getattr(nv, "SampleFormat", None), fmt, None)
        if sf is not None:
            try:
                self.params = nv.DecodeParams(sample_format=sf, **kw)
            except TypeError:  # older nvImageCodec: no sample_format argument
                self.params = nv.DecodeParams(**kw)
        else:
            self.params = nv.DecodeParams(**kw)

    def decode(self, datas, cuda_stream, regions=None):
        """``regions``: None, or per image (top, left, height, width) to decode only that."""
        streams, where = [], []
        for j, d in enumerate(datas):
            try:
                cs = self.nv.CodeStream(d)
                if regions is not None:
                    t, l, h, w = regions[j]
                    cs = cs.get_sub_code_stream(region=self.nv.Region(t, l, t + h, l + w))
                streams.append(cs)
                where.append(j)
            except Exception:  # noqa: BLE001 - unparsable: None at its position, as decode() does
                pass
        out = [None] * len(datas)
        if streams:
            for j, im in zip(where, self.decoder.decode(streams, params=self.params,
                                                        cuda_stream=int(cuda_stream))):
                out[j] = im
        return out


# --------------------------------------------------------------------------------------
# GPU decoding in worker processes (nvImageCodec + gpuaug.resized_crop, results over CUDA IPC)
# --------------------------------------------------------------------------------------
# nvImageCodec's batched decode hands the GIL over once or twice per image: any other Python
# thread of the process that runs meanwhile (the scheduler's, the training loop's) costs it a
# switch interval (5 ms) per image. 256 JPEGs took 10-17 ms alone and 3 s beside one busy
# thread on an H100 host (bench/results/2026-11-25-h100/decode_gil.txt). A process of its own
# has no such neighbours: each child reads its batch's files, decodes them, makes the dense
# (random-)resized crop with gpuaug on its own stream, synchronises, and hands back a CUDA IPC
# handle of the buffer that holds the batch; the parent copies it out on its own stream.

_CHILD: dict = {}

#: Why the GPU decoder refused an image (the in-process path says the same).
UNDECODABLE = "the GPU decoder (nvImageCodec) could not decode it (truncated, corrupt or unsupported)"


def read_checked(paths, max_pixels):
    """A decoding process's reads: (bytes of the readable images, their positions, per-path
    error reason or None); headers checked (recognisable image, ``max_pixels``) first."""
    datas, where, errs = [], [], [None] * len(paths)
    for j, p in enumerate(paths):
        try:
            d = read_file(p)
            check_pixels(header_size(d, p), max_pixels, p)
            datas.append(d)
            where.append(j)
        except ImageDecodeError as e:
            errs[j] = e.reason
    return datas, where, errs


def crop_boxes(sizes, seed, crop, scale, ratio):
    """(n, 4) boxes (top, left, height, width) of a batch's decoded ``sizes``: random resized
    crops drawn from ``seed`` (``crop="random"``), else the whole images."""
    from gpuaug import random as R

    sizes = np.asarray(sizes, np.int64).reshape(-1, 2)
    if crop == "random":
        return R.resized_crop_boxes(np.random.default_rng(seed), sizes, scale, ratio)
    return np.concatenate([np.zeros_like(sizes), sizes], axis=1)


def _gpu_child_init(device_id, mode, size, nbuf):
    """Spawned child: its CUDA context, nvImageCodec decoder, stream and ``nbuf`` batch buffers."""
    import cupy as cp

    cp.cuda.Device(device_id).use()
    _CHILD.update(dec=GpuDecoder(device_id, mode), stream=cp.cuda.Stream(non_blocking=True), size=size,
                  mode=mode, bufs=[], handles=[], next=0, nbuf=nbuf, cp=cp)


def _child_buffer(nbytes):
    st, cp = _CHILD, _CHILD["cp"]
    b = st["next"]
    st["next"] = (b + 1) % st["nbuf"]
    while len(st["bufs"]) <= b:
        st["bufs"].append(None)
        st["handles"].append(None)
    if st["bufs"][b] is None or st["bufs"][b].size < nbytes:
        st["bufs"][b] = cp.cuda.Memory(max(int(nbytes), 1))  # cudaMalloc: an IPC-exportable base pointer
        st["handles"][b] = cp.cuda.runtime.ipcGetMemHandle(st["bufs"][b].ptr)
    return b, st["bufs"][b], st["handles"][b]


def _gpu_child_job(paths, seed, crop, scale, ratio, max_pixels):
    """Read, check, decode and crop one batch; returns (buffer index, IPC handle, buffer
    size, images kept, per-path error reason or None). The kept images fill the buffer's
    first rows in order."""
    from gpuaug._registry import REGISTRY

    resized_crop = REGISTRY["resized_crop"].func

    st = _CHILD
    cp, stream = st["cp"], st["stream"]
    datas, where, errs = read_checked(paths, max_pixels)
    imgs = st["dec"].decode(datas, stream.ptr) if datas else []
    kept = []
    with stream:
        for j, im in zip(where, imgs):
            if im is None:
                errs[j] = UNDECODABLE
                continue
            a = cp.asarray(im)
            kept.append(a[..., None] if a.ndim == 2 else a)
        h, w = st["size"]
        c = 1 if st["mode"] == "L" else 3
        nbytes = max(len(kept), 1) * h * w * c
        b, mem, handle = _child_buffer(nbytes)
        if kept:
            boxes = crop_boxes([a.shape[:2] for a in kept], seed, crop, scale, ratio)
            dense = cp.ndarray((len(kept), h, w, c), np.uint8, memptr=cp.cuda.MemoryPointer(mem, 0))
            resized_crop(kept, boxes.astype(np.float32), (h, w), out=dense)
    stream.synchronize()
    return b, handle, mem.size, len(kept), errs


class GpuProcessDecoder:
    """``decode="gpu", gpu_processes=N``: batches decoded in N spawned processes (see above).

    :meth:`submit` queues a batch (its file paths) by key; :meth:`fetch` waits for it and
    returns ``(dense device batch of the images kept, per-path error reasons)``, the batch
    copied out of the child's buffer on ``stream`` (synchronised: the child reuses the buffer
    ``nbuf`` jobs later). ``ahead``: batches in flight per child."""

    def __init__(self, device_id, processes, mode, size, crop, scale, ratio, max_pixels, ahead=2):
        self.device_id, self.n = int(device_id), int(processes)
        self.mode, self.size, self.crop, self.scale, self.ratio = mode, size, crop, scale, ratio
        self.max_pixels = max_pixels
        self.ahead = max(1, int(ahead)) * self.n
        self._pool = None
        self._pending = {}
        self._opened = {}
        self._lock = threading.Lock()

    def start(self):
        with self._lock:
            if self._pool is None:
                import multiprocessing as mp
                from concurrent.futures import ProcessPoolExecutor

                # spawn: a forked child would inherit this process's CUDA context, which CUDA forbids
                self._pool = ProcessPoolExecutor(self.n, mp_context=mp.get_context("spawn"),
                                                 initializer=_gpu_child_init,
                                                 initargs=(self.device_id, self.mode, self.size, self.ahead + 2))
        return self._pool

    def drain(self, keep=None):
        """Wait for every batch in flight, but those whose key ``keep(key)`` is true, and drop
        its result (a run that ended early, batches submitted ahead for another epoch)."""
        for key in [key for key in self._pending if keep is None or not keep(key)]:
            try:
                self._pending.pop(key).result()
            except Exception:  # noqa: BLE001 - a dropped batch's failure is not this run's
                pass

    def pending(self, key):
        """Whether the batch ``key`` is in flight (submitted, not fetched)."""
        return key in self._pending

    def submit(self, key, paths, seed):
        pool = self.start()
        self._pending[key] = pool.submit(_gpu_child_job, list(paths), int(seed), self.crop, self.scale,
                                         self.ratio, self.max_pixels)

    def fetch(self, key, stream):
        import cupy as cp
        from concurrent.futures.process import BrokenProcessPool

        fut = self._pending.pop(key)
        try:
            b, handle, size, n, errs = fut.result()
        except BrokenProcessPool as e:
            self.close()
            raise RuntimeError(f"a GPU decoding process died ({type(e).__name__}: {e})") from None
        h, w = self.size
        c = 1 if self.mode == "L" else 3
        with stream:  # allocated in the copy stream's order (CuPy's pool reuses memory per stream)
            dense = cp.empty((n, h, w, c), np.uint8)
        if n:
            ptr = self._opened.get(handle)
            if ptr is None:
                ptr = self._opened[handle] = cp.cuda.runtime.ipcOpenMemHandle(handle)
            cp.cuda.runtime.memcpyAsync(dense.data.ptr, ptr, dense.nbytes, cp.cuda.runtime.memcpyDeviceToDevice,
                                        stream.ptr)
            stream.synchronize()
        return dense, errs

    def close(self):
        with self._lock:
            pool, self._pool = self._pool, None
            for fut in self._pending.values():
                fut.cancel()
            self._pending.clear()
            if self._opened:
                import cupy as cp

                for ptr in self._opened.values():
                    try:
                        cp.cuda.runtime.ipcCloseMemHandle(ptr)
                    except Exception:  # noqa: BLE001 - the child (and its memory) may be gone
                        pass
                self._opened.clear()
        if pool is not None:
            pool.shutdown(wait=True, cancel_futures=True)
