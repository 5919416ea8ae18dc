"""Compose: a random augmentation policy that runs as few passes over the pixels as it can.

The planner walks the transforms in order and packs them into *stages*:

- a **fused** stage holds a run of geometric transforms (flips, crops, resizes, rotations,
  affine and perspective warps), composed on the host into one per-sample 3x3 matrix and
  applied as ONE resampling (bilinear); a run of colour transforms, compiled into one
  per-sample colour program (linear parts as 3x4 matrices, then the nonlinear tail: hue,
  gamma, solarize, posterize); and the write (Normalize, ToDtype, ToLayout: a per-channel
  scale and bias, the output dtype and layout). It is one kernel launch, plus one small
  reduction launch over the source when a ColorJitter has contrast (the per-image mean);
- an **op** stage runs a transform that cannot fuse (GaussianBlur, GaussianNoise,
  RandomErasing, RandomEqualize) as the existing gpuaug op.

A new fused stage starts only where fusing would change the result: after an op stage; after
a write (Normalize / ToDtype: values have left the image range); for geometry after colour
that itself came after geometry, or colour after a pre-geometry colour run (one colour run per
stage, before or after the resampling); for a second contrast in one stage (its mean would
depend on the first); and for geometry whose fill differs from the stage's. A colour run that
comes *before* the geometry runs on the source taps before they are interpolated (four
programs per output pixel), which is what colour-then-warp computes. A leading ToDtype from
uint8 to float makes the stage work on [0, 1] floats (scaled as it loads), a leading ToLayout
only picks the output layout. So an all-fusible policy is one launch (two with contrast).

How the fused result relates to running the ops one after another (op-by-op):

- **one resampling instead of several**: the composed map is sampled once (bilinear from the
  4 nearest source pixels), where op-by-op resamples (and, for uint8, rounds) after every
  geometric op. Fused is the more accurate of the two; they differ wherever op-by-op blurs
  twice or crops away what a later warp would bring back. Maps that send pixel centres onto
  pixel centres (flips, quarter turns, integer crops, no scaling) are sampled exactly.
- **borders**: a stage whose geometry can read outside the image (rotation, affine,
  perspective, padded crops) uses a constant border with the transforms' fill for *every*
  tap outside (so a resized crop that upsamples at the image's edge blends half a pixel of
  fill there); otherwise taps are clamped into the image (replicate), as gpuaug.resized_crop.
- **contrast's mean** is the mean gray of the stage's *source* image (after the colour steps
  before the ColorJitter and its brightness, exactly as gpuaug.color_jitter takes it), taken
  by a pre-pass before the resampling; op-by-op takes it over the warped image (a crop's mean).
- **uint8 rounding**: with uint8 images every colour transform's output is rounded to the uint8
  grid (floor(v + 0.5), saturated) -- where op-by-op stores uint8 --, but the resampled values
  enter the colour program unrounded (one rounding fewer). The write (Normalize, ToDtype)
  takes the last colour output (or the resampled value) and rounds only when it stores uint8.

So for a policy without geometry the fused stage computes exactly what the chain of ops
computes (the same maths on the same values: uint8 outputs bit for bit, float outputs to
within float32 rounding of the normalisation's scale and bias, which the fused stage folds
into one multiply-add per channel).

Randomness, ``draws=``:

- ``"auto"`` (the default): ``"device"`` for a CUDA batch on the CUDA C backend where the
  policy and the call can draw there, ``"host"`` otherwise: NumPy input, the Numba backend,
  policies with an op transform, varshape batches, calls with targets (none of these raise).
  So on the GPU a call does no per-sample host work, and on the CPU the host draws (whose
  NumPy twin of the device draws costs more there) are kept. The two draw different values
  for one seed: where a seed must give the same parameters on NumPy and CUDA input, choose
  ``"host"`` (or ``"device"``) explicitly; ``last_params`` replays any call on any backend.
- ``"host"``: each transform draws its parameters per sample from a numpy
  Generator through :mod:`gpuaug.random` (``p`` per sample), so a seed fixes the parameters
  on every backend, and ``last_params`` replays a call exactly. The host then composes the
  matrices and packs the rows: a cost per sample, on every call.
- ``"device"``: the parameters are drawn with Philox4x32-10 keyed by (seed, call counter,
  sample index) -- the same distributions, other streams -- in ONE small launch before the
  fused stages (kernels/fused_draw.cu), which also builds the stages' rows; a call does no
  per-sample host work (the program is made once per policy and input shape), and a call on a
  CuPy array of a geometry seen before (shape, strides, dtype, layout, alignment, device;
  without params, out, stream or targets) replays the first such call's allocations and
  launches from a memo (:class:`_Eager`): the output's allocation (the draw buffer is the
  previous call's when its last_params went unread) and three launches for a one-stage policy
  with contrast, about 10 us of Python on a CPU stand-in. Drawn values
  stay on the device until ``last_params`` is read. NumPy input (``backend="cpu"``) and the
  Numba backend draw the same values with the NumPy twin (:mod:`gpuaug.policy._draw`), so a
  seed gives the same parameters on every backend here too. Policies with an op transform
  (GaussianBlur, GaussianNoise, RandomErasing, RandomEqualize, the automatic policies),
  varshape batches and calls with targets cannot draw on the device: ValueError.

Without a ``seed`` a device-drawn call uses the policy's key and its call counter, which every
such call advances; ``seed=`` (an int or SeedSequence) keys one call with counter 0.
:meth:`Compose.capture` records a device-drawn policy into a CUDA graph.
"""
from __future__ import annotations

import sys
import threading
from dataclasses import dataclass, field

import numpy as np

from gpuaug import _batch as _B
from gpuaug import random as R
from gpuaug._batch import _empty, as_batch
from gpuaug._run import choose_backend
from gpuaug._stream import check_stream, current_device
from gpuaug._util import DTYPE_NAMES, check_choice, cupy_module
from gpuaug.kernels import _cuda as _K
from gpuaug.kernels._cuda import RECORDING
from gpuaug.policy import _fused as F
from gpuaug.policy import transforms as TF
from gpuaug.policy._args import LAYOUTS
from gpuaug.policy._fused import StageSpec

__all__ = ["Compose", "PolicyParams", "Stage", "CapturedPolicy"]

DRAWS = ("host", "device", "auto")
#: A call with targets on the GPU runs their launches on a side stream, beside the images'
#: kernels (gpuaug._stream.Fork); False: after them, on the call's stream (tests/gpu/targets_bench.py
#: times both).
OVERLAP_TARGETS = True
#: captured graphs draw with call counters from here on (capture k: (k + 1) * 2**48 + the
#: policy's counter), so that eager calls and replays never share a counter
_CAPTURE_SPACE = 1 << 48


@dataclass(frozen=True)
class Stage:
    """One stage of a plan: what :meth:`Compose.plan` returns, one per pass over the pixels.

    ``kind``: "fused" or "op". ``transforms``: the names of the transforms it runs, in order, and
    ``indices`` their positions in the policy. ``launches``: the kernels (or op) it launches, in
    order: a fused stage is ``("gpuaug_fused",)`` or, with contrast,
    ``("gpuaug_gray_sum", "gpuaug_fused")`` / ``("gpuaug_fused_sum", "gpuaug_fused")``.
    ``dtype`` and ``layout``: of its output. ``pre_colour``: the colour run comes before the
    geometry (applied to the source taps).
    """

    kind: str
    transforms: tuple
    indices: tuple
    launches: tuple
    dtype: str
    layout: str
    pre_colour: bool = False

    def __str__(self):
        pre = ", colour before geometry" if self.pre_colour else ""
        return (f"{self.kind}[{' + '.join(self.transforms)}] -> {self.dtype} {self.layout} "
                f"({len(self.launches)} launch{'es' if len(self.launches) != 1 else ''}: "
                f"{', '.join(self.launches)}{pre})")


@dataclass(frozen=True)
class PolicyParams:
    """The parameters one call drew: ``values[i]`` is transform i's dict of per-sample arrays.

    ``n`` and ``sizes`` ((n, 2) input heights and widths) say which batches it fits; pass it
    back as ``policy(x, params=p)`` (or ``policy.replay(x, p)``) to repeat the call exactly.
    """

    n: int
    sizes: np.ndarray
    values: tuple
    #: device draws: (DrawPlan, device buffer, rows address) -- a GPU replay reuses the drawn rows
    drawn: object = field(default=None, compare=False, repr=False)

    def __getitem__(self, i):
        return self.values[i]

    def __len__(self):
        return len(self.values)


# ------------------------------------------------------------------------------ planner
def plan_stages(transforms, dtype="uint8"):
    """[("fused", StageSpec) | ("op", index)] for a policy on input of ``dtype`` (see module docstring)."""
    items = []
    cur = np.dtype(dtype).name  # the dtype (value range) of the data at this point of the policy
    spec = StageSpec(in_dtype=cur, sem=cur)
    fill = None

    def close():
        nonlocal spec, fill
        if not spec.empty():
            items.append(("fused", spec))
        spec = StageSpec(in_dtype=cur, sem=cur)
        fill = None

    for i, t in enumerate(transforms):
        if t.kind == "op":
            close()
            items.append(("op", i))
        elif t.kind == "geometry":
            if spec.writes or (spec.colour and spec.geometry and not spec.pre):
                close()  # written, or colour after geometry: this geometry resamples a new image
            if t.needs_fill():
                if fill is not None and tuple(fill) != tuple(t.fill):
                    close()
                fill = t.fill
            if spec.colour and not spec.geometry:
                spec.pre = True  # colour first: the program runs on the source taps
            spec.geometry.append(i)
        elif t.kind == "colour":
            if (spec.writes or (spec.pre and spec.geometry) or (t.contrast and spec.contrast)
                    or len(spec.colour) >= F.MAX_STEPS):
                close()
            spec.colour.append(i)
            spec.contrast |= bool(t.contrast)
        elif isinstance(t, TF.ToLayout) and not spec.writes:
            spec.layout = t.layout  # no pass of its own: only where the stage writes
            spec.folded.append(i)
        elif (isinstance(t, TF.ToDtype) and not (spec.geometry or spec.colour or spec.writes)
              and (t.dtype != "uint8" or cur == "uint8")):
            # leading conversion: the stage works in the new range, scaling as it loads
            spec.in_scale *= t.factor(spec.sem)
            spec.sem = cur = t.dtype
            spec.folded.append(i)
        else:
            spec.writes.append(i)
            if not isinstance(t, TF.ToLayout):
                cur = t.dtype
    close()
    return items


# ------------------------------------------------------------------------------ Compose
class Compose:
    """A random augmentation policy over batches, planned into as few passes as possible.

    ``policy = gpuaug.Compose([transforms...], seed=None)``; ``policy(x, seed=None)`` augments
    the batch ``x`` (NHWC or NCHW via ``layout``, uint8/float16/float32, 1, 3 or 4 channels; a
    NumPy array runs on the CPU twin, any CUDA array on the GPU; a list of HWC images of
    different sizes is a varshape batch) and returns the result (CuPy for CUDA input, NumPy
    for NumPy input; a list when the output sizes differ). See the module docstring for the
    planning rules and how the fused result relates to the ops run one by one.

    Args:
        transforms: the transforms, in order (gpuaug.RandomHorizontalFlip, RandomAffine,
            ColorJitter, Normalize, ...).
        seed: seeds the policy's own generator, which calls without a ``seed`` draw from (None:
            fresh entropy; an int, SeedSequence or Generator).
        draws: "auto" (default: on the device for a CUDA batch where the policy can, else on
            the host), "device" or "host": where the random parameters are drawn (see the
            module docstring; "host" for the same parameters from one seed on NumPy and CUDA
            input).

    Call arguments:
        x: the batch.
        seed: None (the policy's generator), an int / SeedSequence (a fresh generator: the same
            seed gives the same parameters and output everywhere) or a numpy Generator
            (advanced by the call).
        params: a :class:`PolicyParams` (e.g. ``policy.last_params``) to replay instead of
            drawing; its batch size and image sizes must match ``x``.
        out: array (or list) for the final output; layout: the input's layout; stream: CUDA
            stream (None: CuPy's current one); backend: "cuda" (default for CUDA input),
            "numba" (the Numba CUDA twin) or "cpu" (default for NumPy input).
        boxes, keypoints, masks: targets that follow each sample's drawn geometry
            (:mod:`gpuaug.targets`: Boxes, Keypoints, Masks or plain arrays); when any is
            given the call returns ``(images, <the given targets, in that order>)``.

    After a call, ``policy.last_params`` holds what it drew. ``policy.plan()`` lists the stages.

    It is a plain callable ``(batch, seed=None, *, params=None, ...)``, so it serves as the
    scheduler's ``augment`` (it runs on CuPy's current stream, which the scheduler sets) and in
    DALI: inside ``fn.python_function(..., device="gpu", batch_processing=True)`` DALI passes a
    list of per-sample CuPy arrays on its own stream (CuPy's current stream while the function
    runs); when the samples are back to back view them as one 4-D array (else pass the list),
    call ``policy(batch, seed=...)`` with a seed per iteration for reproducibility, and return
    ``list(result)`` (one array per sample). A DALI CPU pipeline passes NumPy arrays: the same
    call runs the CPU twin.

    Example::

        >>> import numpy as np, gpuaug
        >>> policy = gpuaug.Compose([
        ...     gpuaug.RandomHorizontalFlip(),
        ...     gpuaug.RandomAffine(degrees=10, translate=(0.1, 0.1)),
        ...     gpuaug.ColorJitter(0.4, 0.4, 0.4, 0.1),
        ...     gpuaug.Normalize((0.485, 0.456, 0.406), (0.229, 0.224, 0.225)),
        ... ])
        >>> [str(s) for s in policy.plan()]  # doctest: +NORMALIZE_WHITESPACE
        ['fused[RandomHorizontalFlip + RandomAffine + ColorJitter + Normalize] -> float32 NCHW
          (2 launches: gpuaug_gray_sum, gpuaug_fused)']
        >>> x = np.random.default_rng(0).integers(0, 256, (2, 16, 16, 3), dtype=np.uint8)
        >>> y = policy(x, seed=1)
        >>> y.shape, y.dtype
        ((2, 3, 16, 16), dtype('float32'))
        >>> bool((policy(x, params=policy.last_params) == y).all())
        True
    """

    def __init__(self, transforms, *, seed=None, draws="auto"):
        if isinstance(transforms, TF.Transform) or not hasattr(transforms, "__iter__"):
            raise TypeError(f"transforms: got {type(transforms).__name__}; expected a list of gpuaug transforms")
        transforms = tuple(transforms)
        if not transforms:
            raise ValueError("transforms: got an empty list; expected at least one transform")
        for i, t in enumerate(transforms):
            if not isinstance(t, TF.Transform):
                raise TypeError(f"transforms[{i}]: got {type(t).__name__}; expected a gpuaug transform "
                                "(gpuaug.RandomHorizontalFlip, gpuaug.ColorJitter, ...)")
        self.transforms = transforms
        self.draws = check_choice("draws", draws, DRAWS)
        self._rng = R.generator(seed)
        self._seed = seed
        self._key = None        # the Philox key of device draws, made at the first one
        self._counter = 0       # device-drawn calls so far (without a seed)
        self._captures = 0
        self._lock = threading.Lock()
        self._plans = {}
        self._dplans = {}
        self._eager = {}        # _eager_key(x, layout) -> _Eager: warm device-drawn calls
        self._last = None

    @property
    def last_params(self):
        """The :class:`PolicyParams` the last call used (device draws: copied to the host now)."""
        p = self._last
        if isinstance(p, _Drawn):
            p = self._last = p.params()
        return p

    @last_params.setter
    def last_params(self, value):
        self._last = value

    def __getstate__(self):  # picklable (DataLoader workers pickle datasets and their transforms)
        state = dict(self.__dict__)
        del state["_lock"]
        state["_dplans"] = {}
        state["_eager"] = {}
        state.pop("_resizes", None)
        last = self.last_params
        state["_last"] = None if last is None else PolicyParams(last.n, last.sizes, last.values)
        return state

    def __setstate__(self, state):
        for k, v in (("draws", "host"), ("_seed", None), ("_key", None), ("_counter", 0), ("_captures", 0),
                     ("_dplans", {}), ("_eager", {}), ("_last", state.pop("last_params", None))):
            state.setdefault(k, v)  # pickles of older versions
        self.__dict__.update(state)
        self._lock = threading.Lock()

    def __repr__(self):
        inner = "".join(f"\n    {t!r}," for t in self.transforms)
        draws = "" if self.draws == "auto" else f", draws={self.draws!r}"
        return f"Compose([{inner}\n]{draws})"

    # -- sampling -------------------------------------------------------------------------
    def _draw(self, rng, n, sizes):
        values, cur = [], sizes
        resize = self.__dict__.get("_resizes")
        if resize is None or resize[0] is not self.transforms:
            # which transforms change the sizes (the others keep Transform.out_sizes: the sizes
            # as they are, which np.asarray(..., np.int64) returns unchanged from here on)
            resize = self._resizes = (self.transforms, tuple(type(t).out_sizes is not TF.Transform.out_sizes
                                                             or "out_sizes" in t.__dict__
                                                             for t in self.transforms))
        for t, rs in zip(self.transforms, resize[1]):
            values.append(t.sample(rng, n, cur))
            if rs or type(cur) is not np.ndarray or cur.dtype != np.int64:
                cur = np.asarray(t.out_sizes(cur), np.int64)
        return PolicyParams(n, np.array(sizes, np.int64), tuple(values))

    def sample(self, x, seed=None, *, layout="NHWC"):
        """Draw the parameters a call on ``x`` would use (without running it): a
        :class:`PolicyParams`. ``x``: a batch, or an (n, 2) array of image sizes (h, w).
        Where a call would draw on the device (``draws="device"``; ``"auto"`` for a CUDA batch)
        these are the device draws' values, computed by the NumPy twin (without a seed: those
        of the next call; the counter is not advanced here).

        Example::

            >>> import numpy as np, gpuaug
            >>> p = gpuaug.Compose([gpuaug.RandomHorizontalFlip()]).sample(np.zeros((4, 8, 8, 3), np.uint8), seed=0)
            >>> p[0]["apply"]
            array([False,  True,  True,  True])
        """
        sizes_only = isinstance(x, np.ndarray) and x.ndim == 2
        if self.draws == "auto" and not sizes_only:
            b = as_batch(x, layout)
            device = self._use_device(b, choose_backend(b, None), None)
        else:
            device = self.draws == "device"
        if device:
            b = None if sizes_only else as_batch(x, layout)
            if b is None:
                sizes = _sizes_of(x, layout)
                if np.any(sizes != sizes[0]):
                    raise ValueError("x: device draws need images of one size; got sizes that differ")
                b = as_batch(np.zeros((1, int(sizes[0][0]), int(sizes[0][1]), 3), np.uint8))
                n = len(sizes)
            else:
                n = b.n
            plan = self._device_plan(b, "draws")
            key, counter = self._draw_key(seed, advance=False)
            return _twin_params(plan, key, counter, n, b)
        sizes = _sizes_of(x, layout)
        return self._sample(len(sizes), sizes, seed)

    def _sample(self, n, sizes, seed):
        if seed is None:
            with self._lock:
                return self._draw(self._rng, n, sizes)
        return self._draw(R.generator(seed), n, sizes)

    # -- device draws ---------------------------------------------------------------------
    def _draw_key(self, seed, advance=True):
        """(key, counter) of a device-drawn call."""
        if seed is not None:
            return R.philox_key(seed), 0
        with self._lock:
            if self._key is None:
                self._key = R.philox_key(self._rng if self._seed is None or isinstance(self._seed, np.random.Generator)
                                         else self._seed)
            counter = self._counter
            if advance:
                self._counter += 1
        return self._key, counter

    def _device_plan(self, b, why):
        """The cached :class:`gpuaug.policy._draw.DrawPlan` for batches like ``b``; ValueError
        (naming ``why``'s argument) when this policy or batch cannot draw on the device."""
        from gpuaug.policy import _draw as D

        if b.varshape:
            raise ValueError(f"{why}: device draws need a batch of one image size (not a list of images "
                             "of different sizes); use draws='host'")
        name = DTYPE_NAMES[b.dtype]
        shape = b.nhwc.shape
        key = (name, b.channels, b.layout, shape[1], shape[2])
        plan = self._dplans.get(key)
        if plan is None:
            bad = D.unsupported(self.transforms)
            if bad:
                raise ValueError(f"{why}: {bad}; use draws='host'")
            items = self._items(name)
            if any(kind != "fused" for kind, _ in items):
                raise ValueError(f"{why}: the policy has op stages, which cannot draw on the device; use draws='host'")
            plan = self._dplans[key] = D.compile_plan(self.transforms, items, name, b.channels, b.layout,
                                                      shape[1:3])
        return plan

    def _drawn_fits(self, params, b, backend):
        if not (b.device and backend == "cuda") or b.varshape:
            return False
        try:
            return params.drawn[0] is self._device_plan(b, "params")
        except ValueError:
            return False

    def _use_device(self, b, backend, targets):
        """The call's DrawPlan when it draws on the device, else None."""
        if self.draws == "host":
            return None
        if self.draws == "auto":
            if not (b.device and backend == "cuda") or b.varshape or targets is not None:
                return None
            try:
                return self._device_plan(b, "draws")
            except ValueError:
                return None
        if targets is not None:
            raise ValueError("draws: targets (boxes, keypoints, masks) follow host-drawn parameters; "
                             "use draws='host' for calls with targets")
        return self._device_plan(b, "draws")

    # -- planning -------------------------------------------------------------------------
    def _items(self, dtype):
        items = self._plans.get(dtype)
        if items is None:
            items = self._plans[dtype] = plan_stages(self.transforms, dtype)
        return items

    def plan(self, x=None, *, dtype="uint8", channels=3, layout="NHWC"):
        """The stages a call will run, as :class:`Stage` s (one pass over the pixels each).

        ``x``: a batch to plan for (its dtype, channels and layout); else ``dtype``,
        ``channels`` and ``layout`` describe the input.

        Example::

            >>> import gpuaug
            >>> p = gpuaug.Compose([gpuaug.RandomResizedCrop(64), gpuaug.GaussianBlur(5),
            ...                     gpuaug.Normalize(0.5, 0.25)])
            >>> [s.kind for s in p.plan()]
            ['fused', 'op', 'fused']
        """
        if x is not None:
            b = as_batch(x, layout)
            dtype, channels, layout = b.dtype.name, b.channels, b.layout
        else:
            from gpuaug.policy._args import dtype as check_dtype
            dtype = check_dtype("dtype", dtype)
            if channels not in (1, 3, 4):
                raise ValueError(f"channels: got {channels!r}; expected 1, 3 or 4")
            check_choice("layout", layout, LAYOUTS)
        out, cur_dtype, cur_layout = [], dtype, layout
        for kind, item in self._items(dtype):
            if kind == "op":
                t = self.transforms[item]
                out.append(Stage("op", (type(t).__name__,), (item,), (t.op,), cur_dtype, cur_layout))
                continue
            spec = item
            st = {"dtype": spec.sem, "layout": spec.layout or cur_layout, "scale": np.ones(channels),
                  "bias": np.zeros(channels)}
            for i in spec.writes:
                st = self.transforms[i].apply(st)
            idx = tuple(sorted(spec.geometry + spec.colour + spec.writes + spec.folded))
            launches = ("gpuaug_fused",)
            if spec.contrast:
                first = self.transforms[spec.colour[0]]
                gray = (first.contrast and spec.in_scale == 1.0
                        and (spec.sem == "uint8") == (np.dtype(spec.in_dtype) == np.uint8))
                launches = ("gpuaug_gray_sum" if gray else "gpuaug_fused_sum",) + launches
            out.append(Stage("fused", tuple(type(self.transforms[i]).__name__ for i in idx), idx, launches,
                             st["dtype"], st["layout"], bool(spec.pre)))
            cur_dtype, cur_layout = st["dtype"], st["layout"]
        return tuple(out)

    # -- running --------------------------------------------------------------------------
    def __call__(self, x, seed=None, *, params=None, out=None, layout="NHWC", stream=None, backend=None,
                 boxes=None, keypoints=None, masks=None):
        plain = (params is None and out is None and stream is None and (backend is None or backend == "cuda")
                 and boxes is None and keypoints is None and masks is None and self.draws != "host"
                 and not RECORDING[0])
        if plain and _B._CP_NDARRAY and type(x) is _B._CP_NDARRAY[0]:
            # a device-drawn call on a CuPy array: replayed from its memo when warm
            got = self._eager.get(_eager_key(x, layout))
            if got is not None and got.dev == current_device():
                y, self._last = got.run(self, x, seed)
                return y
        b = as_batch(x, layout)
        be = choose_backend(b, backend)
        check_stream(stream)
        if params is not None:
            if seed is not None:
                raise ValueError("seed: got a seed and params; pass one of them (params replays a call)")
            _check_params(params, b, batch_sizes(b), len(self.transforms))
        targets = None
        if boxes is not None or keypoints is not None or masks is not None:
            # gpuaug.targets: checked here, before any pixel is written
            from gpuaug.targets._policy import PolicyTargets

            targets = PolicyTargets(b, batch_sizes(b), boxes, keypoints, masks)
        if params is None:
            device = self._use_device(b, be, targets)  # its DrawPlan, or None
        else:  # device-drawn params replay their rows on the GPU when they fit this batch
            device = params.drawn is not None and targets is None and self._drawn_fits(params, b, be)
        if device and b.device and be == "cuda":
            from gpuaug._stream import on_device

            with on_device(b.device_id(), stream) as st:
                if plain and b.arrays[0] is x:  # x is a CuPy array: this call makes the warm calls' memo
                    y, self._last = self._run_device_eager(x, b, None, seed, device,
                                                           st or cupy_module().cuda.get_current_stream(),
                                                           _eager_key(x, layout))
                    return y
                y, self._last = self._run_device(x, b, out, seed, params, st or cupy_module().cuda.get_current_stream(),
                                                 plan=device if params is None else None)
            return y
        if params is None:
            if device:  # NumPy input / the Numba backend: the NumPy twin of the device draws
                params = _twin_params(device, *self._draw_key(seed), b.n, b)
            else:
                params = self._sample(b.n, batch_sizes(b), seed)
                if targets is not None:  # box-aware crops (gpuaug.targets.RandomIoUCrop ...)
                    params = targets.resolve(self, params, b.dtype.name, stream)
        if b.device:
            from gpuaug._stream import on_stream

            cp = cupy_module()
            with cp.cuda.Device(b.device_id()), on_stream(stream):
                built = [] if targets is not None else None  # the stages' maps, for the targets
                # the targets' launches on a side stream, beside the images' kernels (forked
                # before them: the targets read only the call's inputs)
                fork = None
                if targets is not None and OVERLAP_TARGETS and not RECORDING[0] and targets.fusable(be):
                    from gpuaug._stream import Fork

                    fork = Fork.maybe(cp.cuda.get_current_stream())
                try:
                    y = self._run(x, b, params, out, be, built)
                    if targets is not None:
                        y = (y,) + targets.run(self, params, b.dtype.name, None, be, built, fork)
                finally:
                    if fork is not None:
                        fork.join()
        else:
            built = [] if targets is not None else None
            y = self._run(x, b, params, out, be, built)
            if targets is not None:
                y = (y,) + targets.run(self, params, b.dtype.name, None, be, built)
        self._last = params  # (last_params' setter, without the property call)
        return y

    def _run_device(self, x, b, out, seed, params, st, ws=None, counter_dev=None, plan=None):
        """A device-drawn call on CuPy's current stream: (result, what last_params will read).

        ``params``: device-drawn PolicyParams to replay (their rows, as they are). ``ws``: a
        dict of preallocated buffers (a capture: filled at the first run, reused after);
        ``counter_dev``: the device counter a captured graph advances. ``plan``: the batch's
        DrawPlan when the caller has it."""
        from gpuaug.policy import _draw as D

        plan = plan or self._device_plan(b, "draws")
        if ws is None and params is None:
            return self._run_device_eager(x, b, out, seed, plan, st)
        cp = cupy_module()
        n = b.n
        if params is not None:  # device-drawn (checked by _drawn_fits)
            buf, base = None, params.drawn[2]
        else:
            # one buffer: the (n, V) float64 values, then the (n, P) float32 rows
            if ws is None:
                buf = cp.empty(n * plan.V + (n * plan.P + 1) // 2, cp.float64)
            else:
                buf = ws.get("buf")
                if buf is None:
                    buf = ws["buf"] = cp.empty(n * plan.V + (n * plan.P + 1) // 2, cp.float64)
            key, counter = self._draw_key(seed) if counter_dev is None else (self._draw_key(None, False)[0], 0)
            vptr = buf.data.ptr
            base = vptr + 8 * n * plan.V
            D.launch_draw(plan, n, key, counter, vptr, base, counter_dev)
        cur, cur_b = x, b
        for k, sp in enumerate(plan.stages):
            last = k == len(plan.stages) - 1
            if cur_b is None:
                cur_b = as_batch(cur, plan.stages[k - 1].built.out_layout)
            built = _with_n(sp, n)
            if ws is not None and ("out", k) in ws:
                result, dst, partials = ws[("out", k)]
            else:
                result, dst = F.allocate(cur_b, out if last else None, built)
                partials = None
                if ws is not None:
                    shp = F.partials_shape(sp.spec, built, cur_b, dst)
                    partials = None if shp is None else cp.empty(shp, cp.float64)
                    ws[("out", k)] = (result, dst, partials)
            F.launch_cuda(sp.spec, built, cur_b, dst, par=base + 4 * sp.col, stride=plan.P, partials=partials)
            cur, cur_b = result, None
        if buf is None:
            return cur, params
        return cur, _Drawn(plan, buf, base, b.n, b.nhwc.shape[1:3], st)

    def _run_device_eager(self, x, b, out, seed, plan, st, memo=None):
        """:meth:`_run_device` for an eager call that draws: the outputs first (their launch
        plans say how many contrast partial sums each stage needs), then ONE device buffer for
        the drawn values, the rows and the partial sums (one allocation a call instead of one
        plus one per contrast stage), then the draw and the stages' launches, in that order.
        ``memo``: the call's :func:`_eager_key`; the call then also keeps, under it, the
        :class:`_Eager` that replays the same allocations and launches for later calls."""
        from gpuaug.policy import _draw as D

        cp = cupy_module()
        n = b.n
        drawer = D.draw_launcher(plan, n)
        todo, extra = [], 0
        cur, cur_b = x, b
        for k, sp in enumerate(plan.stages):
            last = k == len(plan.stages) - 1
            if cur_b is None:
                cur_b = as_batch(cur, plan.stages[k - 1].built.out_layout)
            built = _with_n(sp, n)
            result, dst = F.allocate(cur_b, out if last else None, built)
            lp = F.stage_launch_plan(sp.spec, built, cur_b, dst)
            todo.append((sp, built, cur_b, dst, lp, None if lp.sum_fn is None else extra))
            if lp.sum_fn is not None:
                extra += n * lp.nparts
            cur, cur_b = result, None
        # the (n, V) float64 values, the (n, P) float32 rows, then the float64 partial sums
        rows_words = (n * plan.P + 1) // 2
        buf = cp.empty(n * plan.V + rows_words + extra, cp.float64)
        key, counter = self._draw_key(seed)
        vptr = buf.data.ptr
        base = vptr + 8 * n * plan.V
        sums = base + 8 * rows_words
        D.launch_draw(plan, n, key, counter, vptr, base, launcher=drawer)
        for sp, built, src_b, dst, lp, off in todo:
            F.launch_cuda(sp.spec, built, src_b, dst, par=base + 4 * sp.col, stride=plan.P,
                          partials=None if off is None else sums + 8 * off, lp=lp)
        if memo is not None:
            eager = _Eager.make(plan, b, drawer, todo, buf.size, memo[-1])
            if eager is not None:
                if len(self._eager) >= 64:
                    self._eager.clear()
                self._eager[memo] = eager
        return cur, _Drawn(plan, buf, base, b.n, b.nhwc.shape[1:3], st)

    def capture(self, shape=None, dtype="uint8", layout="NHWC", *, input=None, device=None):
        """Record this policy, for batches of one ``shape``, ``dtype`` and ``layout``, into a CUDA
        graph: a :class:`CapturedPolicy` whose call replays it (the device draw, which advances
        a counter on the device, and every fused launch), a few microseconds of host time.

        The graph reads a fixed input buffer (``captured.input``: fill it, or pass the batch to
        the call, which copies it in on the device; ``input=``: a CUDA array of yours to read
        instead, e.g. a staging slot you fill, which also gives shape, dtype and device) and
        writes a fixed output
        (``captured.output``, overwritten by the next replay: copy it to keep it). Needs a
        policy that can draw on the device (any ``draws``: the graph always draws there) and
        CuPy. Replays draw with their own counters (capture k of a policy starts at
        (k + 1) * 2**48 plus the policy's counter), so they never repeat an eager call's draws.

        Example (on a GPU)::

            g = policy.capture((256, 224, 224, 3))
            for batch in loader:          # CuPy uint8 (256, 224, 224, 3)
                y = g(batch)              # a device-drawn policy(batch), the graph's next counter
        """
        cp = cupy_module()
        layout = check_choice("layout", layout, LAYOUTS)
        if input is not None:
            xbuf = input if isinstance(input, cp.ndarray) else cp.asarray(input)  # zero-copy
            dev = xbuf.device.id
        elif shape is None:
            raise ValueError("shape: got None and no input=; expected the batch shape, e.g. (256, 224, 224, 3)")
        else:
            dev = cp.cuda.runtime.getDevice() if device is None else int(device)
        with cp.cuda.Device(dev):
            if input is None:
                xbuf = cp.zeros(tuple(int(v) for v in shape), dtype)
            b = as_batch(xbuf, layout, name="input" if input is not None else "shape")
            self._device_plan(b, "capture")  # refuses a policy or batch that cannot draw on the device
            with self._lock:
                self._captures += 1
                start = self._captures * _CAPTURE_SPACE + self._counter
            counter_dev = cp.asarray(np.array([start, 0], np.uint64))  # the counter, the draw's ticket
            stream = cp.cuda.Stream(non_blocking=True)
            ws = {}
            with stream:
                # compiles every kernel, allocates every buffer and caches the descriptor tables
                # on this stream; then the same launches again, captured
                self._run_device(xbuf, b, None, None, None, stream, ws, counter_dev)
                counter_dev.set(np.array([start, 0], np.uint64))
                stream.synchronize()
                stream.begin_capture()
                try:
                    y, drawn = self._run_device(xbuf, b, None, None, None, stream, ws, counter_dev)
                finally:
                    graph = stream.end_capture()
            stream.synchronize()
        return CapturedPolicy(self, graph, xbuf, y, drawn, counter_dev, dev, layout)

    def replay(self, x, params, **kwargs):
        """Run the policy with ``params`` (a :class:`PolicyParams`, e.g. ``last_params``) instead of
        drawing new ones: ``policy.replay(x, p)`` is ``policy(x, params=p)``.

        Example::

            >>> import numpy as np, gpuaug
            >>> pol = gpuaug.Compose([gpuaug.RandomRotation(30)])
            >>> x = np.zeros((2, 8, 8, 1), np.float32)
            >>> bool((pol(x, seed=3) == pol.replay(x, pol.last_params)).all())
            True
        """
        return self(x, params=params, **kwargs)

    def _run(self, x, b, params, out, backend, built=None):
        """Run the stages; ``built``: a list to append each fused stage's (StageSpec, Built) to."""
        name = DTYPE_NAMES[b.dtype]  # a dict lookup: numpy's dtype.name builds its string each time
        items = self._items(name)
        cur, cur_b, cur_layout, cur_dtype = x, b, b.layout, name
        for k, (kind, item) in enumerate(items):
            last = k == len(items) - 1
            if cur_b is None:
                cur_b = as_batch(cur, cur_layout)
            if kind == "op":
                t = self.transforms[item]
                cur = t.run(cur, params[item], dtype=cur_dtype, layout=cur_layout, backend=backend, stream=None,
                            out=out if last else None)
            else:
                cur, cur_layout, cur_dtype = self._fused(item, cur_b, params, out if last else None, backend, built)
            cur_b = None
        return cur

    def _fused(self, spec, b, params, out, backend, keep=None):
        built = F.build(spec, self.transforms, params.values, b, b.layout)
        if keep is not None:
            keep.append((spec, built))
        result, dst = F.allocate(b, out, built)
        if backend == "cuda":
            F.launch_cuda(spec, built, b, dst)
        else:
            F.launch_numba(spec, built, b, dst, "cpu" if backend == "cpu" else "cuda")
        return result, built.out_layout, built.out_dtype


def batch_sizes(b):
    """The (n, 2) int64 per-sample (h, w) of a parsed batch, as the policy's draws read them
    (read-only and memoised for a uniform batch)."""
    if b.varshape:
        return np.asarray(b.shapes, np.int64).reshape(b.n, 2)
    s = b.nhwc.shape
    return F.uniform_sizes(s[0], s[1], s[2])


def _sizes_of(x, layout):
    if isinstance(x, np.ndarray) and x.ndim == 2 and x.shape[1] == 2 and np.issubdtype(x.dtype, np.integer):
        if np.any(x <= 0):
            raise ValueError("x: got sizes with a zero or negative entry; expected (n, 2) positive (h, w)")
        return x.astype(np.int64)
    return batch_sizes(as_batch(x, layout))


def _check_params(params, b, sizes, count):
    if not isinstance(params, PolicyParams):
        raise TypeError(f"params: got {type(params).__name__}; expected a PolicyParams (e.g. policy.last_params)")
    if len(params.values) != count:
        raise ValueError(f"params: holds {len(params.values)} transforms' parameters; the policy has {count}")
    if params.n != b.n:
        raise ValueError(f"params: were drawn for {params.n} samples; the batch has {b.n}")
    if not np.array_equal(params.sizes, sizes):
        raise ValueError("params: were drawn for images of other sizes "
                         f"(first {tuple(params.sizes[0])}, the batch's {tuple(sizes[0])}); expected the same sizes")


def _with_n(sp, n):
    """sp.built with the output shapes of n samples (memoised per n on the StagePlan)."""
    import dataclasses

    from gpuaug._batch import Same

    cache = sp.__dict__.setdefault("_by_n", {})
    got = cache.get(n)
    if got is None:
        got = cache[n] = dataclasses.replace(sp.built, shapes=Same(sp.out_hw, n))
    return got


def _twin_params(plan, key, counter, n, b):
    """PolicyParams of a device-drawn call, computed on the host by the NumPy twin."""
    from gpuaug.policy import _draw as D

    sizes = batch_sizes(b) if b.n == n else np.broadcast_to(np.asarray(b.nhwc.shape[1:3], np.int64), (n, 2))
    values = D.twin_values(plan, key, counter, n)
    return PolicyParams(n, np.array(sizes, np.int64), D.to_params(plan, values, sizes))


def _eager_key(x, layout):
    """What a device-drawn call's allocations and launches depend on, of a CuPy array ``x``
    read in ``layout``: its shape, strides, dtype, address modulo 16 (the packed reduction
    reads 16 bytes at a time) and device (last)."""
    mem = x.data
    return (x.shape, x.strides, x.dtype, layout, mem.ptr & 15, mem.device_id)


def _prepared(fn, grid, block, types):
    """``go(args)``: ``fn`` launched on ``grid`` x ``block`` with ``args`` of ``types`` (device
    addresses as ints), packed by gpuaug.kernels._cuda.Kernel.prepared; a kernel without it
    (a CuPy RawKernel) is called as ``fn(grid, block, args)``."""
    prep = getattr(fn, "prepared", None)
    go = prep(grid, block, types) if prep is not None else None
    return go if go is not None else (lambda args: fn(grid, block, args))


_I32, _PTR = np.int32, int  # argument types of the prepared launches (addresses as ints)


class _Eager:
    """A warm device-drawn call: for one policy and input geometry (:func:`_eager_key`),
    what :meth:`Compose._run_device_eager` works out before it allocates and launches --
    the outputs' shapes and dtypes, the buffer's size and offsets, the launch plans, the
    kernels prepared with their grids and argument types, the descriptor tables' keys --
    made once by its first call. A later call (:meth:`run`) allocates the outputs and the
    buffer, takes the call's key and counter and launches the draw and the stages with the
    same arguments, in the same order: the same launches, bit for bit, apart from the buffer's
    address (tests/test_compose_eager_memo.py). The buffer is the previous call's when nothing
    else holds it (its last_params unread) and this call runs on its stream (whose order puts
    the previous call's reads before this call's draw): one CuPy allocation less per call. Calls with params, out, stream, targets or a backend other
    than "cuda", and calls while gpuaug.kernels._cuda records, take the general path."""

    __slots__ = ("plan", "n", "hw", "dev", "words", "voff", "soff", "draw", "draw_args", "stages")

    @classmethod
    def make(cls, plan, b, drawer, todo, words, dev):
        """The memo of a call that ran ``todo`` (:meth:`Compose._run_device_eager`'s list), or
        None where a later call could need other launches: a stage after the first whose
        source (the previous output, from CuPy's pool: 512-byte aligned) is not 16-byte aligned."""
        self = cls()
        n = b.n
        self.plan, self.n, self.hw, self.dev, self.words = plan, n, tuple(b.nhwc.shape[1:3]), dev, words
        self.voff = 8 * n * plan.V
        self.soff = 8 * ((n * plan.P + 1) // 2)
        fn, grid, block, prog, nrec, cst, nn, vv, pp = drawer
        self.draw = _prepared(fn, grid, block, (_PTR, _I32, _PTR, _I32, np.uint32, np.uint32, np.uint64, _PTR,
                                                _PTR, _I32, _PTR, _I32))
        # the device program and constants stay alive with the memo (their addresses follow them)
        self.draw_args = (prog, cst, prog.data.ptr, int(nrec), cst.data.ptr, int(nn), int(vv), int(pp))
        stages = []
        for k, (sp, built, src_b, dst, lp, off) in enumerate(todo):
            if k and src_b.arrays[0].data.ptr & 15:
                return None
            # (index: 0 the source, 1 the output; the table key after its address; layout)
            tables = ()
            if lp.need_tables:
                tables = tuple((i, _B._table_key(bb)[1:], bb.layout)
                               for i, bb in enumerate([src_b] if lp.dense else [src_b, dst]))
            N, nparts = int(src_b.n), int(lp.nparts)
            # launch_cuda's arguments: (tables or src, dst), par, then mid[:-1], partials, nparts
            mid = (plan.P, N) + tuple(int(v) for v in lp.dims) + (nparts,)
            sum_go, sum_mid = None, ()
            if lp.sum_fn is not None:
                sum_mid = (plan.P, N, F.P_COLOUR) if lp.gray else (plan.P, N)
                sum_go = _prepared(lp.sum_fn, (nparts, min(N, 65535), 1), (256, 1, 1),
                                   (_PTR, _PTR) + (_I32,) * len(sum_mid) + (_PTR, _I32))
            go = _prepared(lp.fn, lp.grid, (256, 1, 1),
                           (_PTR, _PTR, _PTR) + (_I32,) * (len(mid) - 1) + (_PTR, _I32) if lp.dense
                           else (_PTR, _PTR, _PTR, _I32, _I32, _PTR, _I32))
            res = dst.arrays[0]
            stages.append((tuple(res.shape), res.dtype, 4 * sp.col, None if off is None else 8 * off, tables,
                           sum_go, sum_mid, go, mid, lp.dense))
        self.stages = tuple(stages)
        return self

    def run(self, policy, x, seed):
        """One call on ``x`` (on the current device and stream): (result, its :class:`_Drawn`)."""
        cp = cupy_module()
        st = cp.cuda.get_current_stream()
        outs = [_empty(cp, shape, dtype, "out") for shape, dtype, *_ in self.stages]
        prev = policy._last
        if (type(prev) is _Drawn and prev.stream is not None and prev.stream.ptr == st.ptr
                and prev.buf.size == self.words and _buf_refs(prev) == _SOLE_REFS):
            # the previous call's buffer, which nothing but its _Drawn holds (last_params not
            # read), on this stream: its launches read it before this call's draw writes it
            buf = prev.buf
        else:
            buf = cp.empty(self.words, cp.float64)
        key, counter = policy._draw_key(seed)
        _, _, prog, nrec, cst, nn, vv, pp = self.draw_args
        vptr = buf.data.ptr
        base = vptr + self.voff
        sums = base + self.soff
        self.draw((prog, nrec, cst, nn, key[0], key[1], counter, 0, vptr, vv, base, pp))
        src = x
        for (_, _, col, off, tables, sum_go, sum_mid, go, mid, dense), dst in zip(self.stages, outs):
            sptr, dptr = src.data.ptr, dst.data.ptr
            par = base + col
            tail = (0 if off is None else sums + off,) + mid[-1:]  # (partials, nparts)
            if tables:
                cache = _K.constants(self.dev)
                tabs = [cache.get(("table", sptr if i == 0 else dptr) + rest,
                                  lambda a=(src if i == 0 else dst), lay=lay: _B.descriptor_table(as_batch(a, lay))
                                  ).data.ptr for i, rest, lay in tables]
                if sum_go is not None:  # (a contrast reduction reads the source's table)
                    sum_go((tabs[0], par) + sum_mid + tail)
            if dense:
                go((sptr, dptr, par) + mid[:-1] + tail)
            else:
                go((tabs[0], tabs[1], par) + mid[:-1] + tail)
            src = dst
        return src, _Drawn(self.plan, buf, base, self.n, self.hw, st)


def _buf_refs(drawn):
    """References to ``drawn.buf`` as this line sees them (compared with :data:`_SOLE_REFS`,
    counted by this same code, so the interpreter's own stack references cancel out)."""
    return sys.getrefcount(drawn.buf)


class _Drawn:
    """A device-drawn call's parameters, still on the device: read back at the first look.
    ``buf`` holds the (n, V) values and, from address ``rows``, the stages' (n, P) rows."""

    __slots__ = ("plan", "buf", "rows", "n", "hw", "stream")

    def __init__(self, plan, buf, rows, n, hw, stream):
        self.plan, self.buf, self.rows, self.n = plan, buf, rows, n
        self.hw = tuple(hw)  # (NumPy and CuPy shapes hold Python ints)
        self.stream = stream

    @property
    def values(self):
        """The (n, V) device values."""
        return self.buf[:self.n * self.plan.V].reshape(self.n, self.plan.V)

    def params(self, keep_rows=True):
        from gpuaug.policy import _draw as D

        host = self.values.get(stream=self.stream)  # waits for the call's stream only
        sizes = np.broadcast_to(np.asarray(self.hw, np.int64), (self.n, 2))
        return PolicyParams(self.n, np.array(sizes), D.to_params(self.plan, host, sizes),
                            (self.plan, self.buf, self.rows) if keep_rows else None)


#: :func:`_buf_refs` of a _Drawn whose buffer nothing else holds
_SOLE_REFS = _buf_refs(_Drawn(None, object(), 0, 0, (), None))


class CapturedPolicy:
    """A :class:`Compose` recorded into a CUDA graph by :meth:`Compose.capture`.

    ``captured(x=None, *, stream=None)``: copies ``x`` (a CUDA array of the captured shape and
    dtype; None: the caller filled ``captured.input``) into the input buffer, replays the graph
    on ``stream`` (None: CuPy's current stream) and returns ``captured.output``, which the next
    replay overwrites. ``last_params``: the parameters of the latest replay (copied to the host
    when read). ``input``, ``output``, ``graph``: the buffers and the cupy.cuda.Graph.
    """

    def __init__(self, policy, graph, xbuf, out, drawn, counter_dev, device, layout):
        self.policy, self.graph, self.input, self.output = policy, graph, xbuf, out
        self._drawn, self.counter, self.device, self.layout = drawn, counter_dev, device, layout
        self._nbytes = xbuf.nbytes

    def __call__(self, x=None, *, stream=None):
        from gpuaug._stream import on_device

        with on_device(self.device, stream) as st:
            st = st or cupy_module().cuda.get_current_stream()
            if x is not None:
                self._copy_in(x, st)
            self.graph.launch(st)
            self._drawn.stream = st
        return self.output

    def _copy_in(self, x, st):
        cp = cupy_module()
        if x is self.input:
            return
        if not isinstance(x, cp.ndarray):
            x = cp.asarray(x)
        if x.shape != self.input.shape or x.dtype != self.input.dtype:
            raise ValueError(f"x: got {x.dtype} {tuple(x.shape)}; the graph was captured for "
                             f"{self.input.dtype} {tuple(self.input.shape)}")
        if x.flags.c_contiguous and x.device.id == self.device:
            cp.cuda.runtime.memcpyAsync(self.input.data.ptr, x.data.ptr, self._nbytes,
                                        cp.cuda.runtime.memcpyDeviceToDevice, st.ptr)
        else:
            self.input[...] = x

    @property
    def last_params(self):
        """The latest replay's :class:`PolicyParams` (read back from the device now)."""
        return self._drawn.params(keep_rows=False)
