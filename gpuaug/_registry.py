"""The op registry: the single source of what gpuaug can do.

Every op module under :mod:`gpuaug.ops` describes itself with one :class:`OpSpec`
(its public function, parameters, dtypes, layouts, backends) and the list
``OP_MODULES`` below names the modules; adding an op means adding its files and one
line to that list. The DALI adapters, the benchmarks, the demo and the docs read
this registry; nothing else keeps its own list of ops.

``REGISTRY`` is a read-only mapping from op name to :class:`OpSpec`. It is filled on
first access (importing an op module imports no CUDA library), so ``import gpuaug``
stays quick.

Example::

    >>> import gpuaug
    >>> spec = gpuaug.registry["flip"]
    >>> [p.name for p in spec.params]
    ['horizontal', 'vertical']
"""
from __future__ import annotations

import importlib
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Callable

#: The op modules, one line per op module (a module may define several ops).
OP_MODULES = (
    "flip",
    "rot90",
    "transpose",
    "crop",
    "pad",
    "warp_affine",
    "warp_perspective",
    "rotate",
    "resize",
    "resized_crop",
    "gamma",
    "invert",
    "solarize",
    "posterize",
    "equalize",
    "autocontrast",
    "normalize",
    "crop_mirror_normalize",
    "gaussian_blur",
    "box_blur",
    "sharpen",
    "median_blur",
    "gaussian_noise",
    "salt_and_pepper",
    "erase",
    "grid_mask",
    "brightness",
    "contrast",
    "saturation",
    "hue",
    "color_jitter",
    "color_twist",
    "grayscale",
    "channel_shuffle",
)

DTYPES = ("uint8", "float16", "float32")
LAYOUTS = ("NHWC", "NCHW")
BACKENDS = ("cuda", "numba", "cpu")


#: ``Param.high`` for "the input dtype's maximum": 255.0 for uint8, 1.0 for float16/float32.
DTYPE_MAX = "dtype max"


@dataclass(frozen=True)
class Param:
    """One parameter of an op.

    ``per_sample``: True when the value may be a length-N array (one value per
    sample). ``shape``: the shape of one sample's value (``()`` for a number,
    ``(2, 3)`` for an affine matrix). ``kind``: "float", "int", "bool", "choice",
    "size" (host-only: it decides the output shape) or "other".

    The accepted values, which the bad-input tests and docs/errors.md are generated from:
    ``low`` / ``high``: the smallest / largest accepted value (``low_open``: ``low`` itself
    is refused; ``high=DTYPE_MAX``: the input dtype's maximum); ``nonzero``: 0 is refused;
    ``choices``: the only accepted values. ``expect``: what the op's error message says
    after "expected " for a value outside the range, where it is not :func:`per_sample`'s
    ``values >= low`` / ``values > low`` / ``values <= high``; ``range_doc``: the words for
    docs/errors.md where the bounds alone do not say it.
    """

    name: str
    default: Any = None
    per_sample: bool = True
    shape: tuple = ()
    kind: str = "float"
    choices: tuple = ()
    doc: str = ""
    low: Any = None
    high: Any = None
    low_open: bool = False
    nonzero: bool = False
    expect: str = ""
    range_doc: str = ""

    @property
    def bounded(self):
        """Whether some value of the right type and shape is refused (a range, a choice, a flag)."""
        return (self.low is not None or self.high is not None or self.nonzero or bool(self.choices)
                or (self.kind == "bool" and self.per_sample))

    def high_for(self, dtype):
        """``high`` for an input of ``dtype`` (resolves :data:`DTYPE_MAX`)."""
        if self.high == DTYPE_MAX:
            from gpuaug._util import dtype_max

            return dtype_max(dtype)
        return self.high

    def limits(self, dtype="uint8"):
        """The range as :func:`gpuaug._params.per_sample` keywords (``low``, ``high``,
        ``low_open``), so an op can check a value against its own spec::

            per_sample(scale, b.n, SCALE.name, **SCALE.limits(b.dtype), device=b.device)
        """
        return {"low": self.low, "high": self.high_for(dtype), "low_open": self.low_open}

    def range_text(self):
        """The accepted values in words (docs/errors.md's per-op ranges), "" when unbounded."""
        if self.range_doc:
            return self.range_doc
        if self.kind == "bool":
            return "True/False or 0/1 per sample" if self.per_sample else "True or False"
        if self.choices:
            return "one of " + ", ".join("None" if c is None else str(c) for c in self.choices)
        if self.high == DTYPE_MAX and self.low is not None and not self.low_open:
            return f"in [{self.low}, 255] (uint8) or [{self.low}, 1] (floats)"
        if self.low is not None and self.high is not None and not self.low_open:
            return f"{'integers ' if self.kind == 'int' else ''}in [{self.low}, {self.high}]"
        words = []
        if self.low is not None:
            words.append(f"{'>' if self.low_open else '>='} {self.low}")
        if self.high is not None:
            words.append(f"<= {self.high_for('float32')}")
        if self.nonzero:
            words.append("!= 0")
        return " and ".join(words)


@dataclass(frozen=True)
class OpSpec:
    """What the rest of gpuaug needs to know about an op.

    ``func``: the public function ``func(x, *params, out=None, layout="NHWC",
    stream=None, backend=None)``. ``example``: ``example(rng, n, h, w) -> dict`` of
    per-sample keyword arguments that the demo, benchmarks and DALI tests use.
    ``kernels``: where its twins live (CUDA C file/template, Numba module/function), for
    compile checks. ``geometric``: the op moves pixels (vs. changes their values). ``changes_shape``:
    the output's height/width may differ from the input's. ``demo``: the parameters ``gpuaug
    demo`` shows it with, a dict or a tuple of dicts, one tile each (None: its example).
    ``range_notes``: docs/errors.md's words for checks across parameters. ``peers``: library ->
    the other library's op the benchmarks time it against (``{"dali": "hsv"}``: a DALI built-in
    graph of dali_plugins/_bench.py); ``bench_params(h, w)``: overrides of ``example`` for those
    comparisons (the same work as the peer's).
    """

    name: str
    func: Callable
    params: tuple = ()
    dtypes: tuple = DTYPES
    layouts: tuple = LAYOUTS
    channels: tuple = (1, 3, 4)
    backends: tuple = BACKENDS
    varshape: bool = True
    geometric: bool = True
    changes_shape: bool = False
    example: Callable | None = None
    kernels: Any = None  # gpuaug._run.Kernels: where the CUDA C and Numba twins live
    doc: str = field(default="", repr=False)
    demo: dict | None = None  # parameters for ``gpuaug demo`` (one 256x256 photo); None: the example
    range_notes: str = ""  # docs/errors.md: what the Params' ranges do not say (windows, sizes)
    peers: dict = field(default_factory=dict)  # library -> the peer op the benchmarks compare with
    bench_params: Callable | None = None  # (h, w) -> overrides of the example, like-for-like with peers

    @property
    def param_names(self):
        return tuple(p.name for p in self.params)

    @property
    def call(self):
        """``func`` behind its launch plans (:mod:`gpuaug._plan`): what ``gpuaug.<name>`` is."""
        from gpuaug._plan import planned_op

        return planned_op(self.name, self.func)

    def limits(self, name, dtype="uint8"):
        """Param ``name``'s range as :func:`gpuaug._params.per_sample` keywords
        (:meth:`Param.limits`): how an op checks its values against its own spec."""
        key = (id(self), name, dtype)
        got = _LIMITS.get(key)
        if got is not None and got[0] is self:
            return dict(got[1])  # a copy: the caller may keep or change its own
        for p in self.params:
            if p.name == name:
                lim = p.limits(dtype)
                if len(_LIMITS) >= 1024:
                    _LIMITS.clear()
                _LIMITS[key] = (self, lim)  # specs are frozen: their ranges never change
                return dict(lim)
        raise KeyError(f"{self.name} has no parameter {name!r}")


#: OpSpec.limits per (spec, parameter, dtype): ops look their ranges up on every call.
_LIMITS: dict = {}


class _Registry(Mapping):
    """Lazily filled, read-only mapping name -> OpSpec."""

    def __init__(self):
        self._specs = None

    def _load(self):
        if self._specs is None:
            specs = {}
            for mod in OP_MODULES:
                # a dotted name is a module outside gpuaug.ops (tests register throwaway ops so)
                m = importlib.import_module(mod if "." in mod else f"gpuaug.ops.{mod}")
                for spec in m.SPECS:
                    if spec.name in specs:
                        raise RuntimeError(f"op {spec.name!r} registered twice")
                    specs[spec.name] = spec
            self._specs = specs
        return self._specs

    def __getitem__(self, name):
        specs = self._load()
        try:
            return specs[name]
        except KeyError:
            raise KeyError(f"no op named {name!r}; known ops: {', '.join(sorted(specs))}") from None

    def __iter__(self):
        return iter(self._load())

    def __len__(self):
        return len(self._load())

    def __repr__(self):
        return f"<gpuaug registry: {', '.join(self._load())}>"


REGISTRY = _Registry()


def ranges_table(registry=None):
    """docs/errors.md's "Ranges per op" table, generated from the Params' ranges (``range_text``)
    and each OpSpec's ``range_notes``; ops with the same row share one. Markdown lines."""
    rows = {}
    for name, spec in (REGISTRY if registry is None else registry).items():
        seen = []
        for p in spec.params:
            text = p.range_text()
            if text and seen and seen[-1][1] == text:
                seen[-1][0].append(p.name)
            elif text:
                seen.append(([p.name], text))
        parts = [f"{', '.join(f'`{n}`' for n in names)}: {text}" for names, text in seen]
        if spec.range_notes:
            parts.append(spec.range_notes)
        rows.setdefault("; ".join(parts) or "no bounded parameters", []).append(name)
    return ["| op | parameter: accepted values |", "|---|---|"] + [
        f"| {', '.join(names)} | {text} |" for text, names in rows.items()]
