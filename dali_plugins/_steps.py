"""The graph side of the DALI adapters: one op call as a :class:`Step`, checked against the registry.

A step holds what the callback needs at run time: the op's name, its constant arguments
and the names of the arguments that arrive as DataNodes (one value per sample), in the
order they are wired as extra inputs. Everything here is decided while the pipeline is
defined, so argument mistakes fail there, naming the op and the argument.

Rules, all read from :data:`gpuaug.registry`:

- a parameter of kind ``"size"`` (it decides the output shape) or with
  ``per_sample=False`` (a mode, a dtype, a flag) must be a constant;
- a parameter of kind ``"choice"`` is checked against its choices here;
- a host-only int parameter named ``seed`` (the noise ops) advances by one every batch,
  so each batch draws new noise: batch ``i`` uses ``seed + i`` (``seed`` defaults to one
  drawn from the pipeline's seed);
- an op with a ``"choice"`` parameter named ``output_layout`` writes that layout (None:
  the input's); every other op keeps the input's layout.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from gpuaug._registry import REGISTRY

#: Keyword arguments of every adapter that are not op parameters.
RESERVED = ("backend", "layout", "input_dtype")

#: Accepted spellings of a layout -> the op's batch layout.
LAYOUTS = {"HWC": "NHWC", "NHWC": "NHWC", "CHW": "NCHW", "NCHW": "NCHW"}
#: The op's batch layout -> DALI's per-sample layout.
SAMPLE_LAYOUT = {"NHWC": "HWC", "NCHW": "CHW"}


def is_node(value) -> bool:
    """True for a DALI DataNode (DALI is imported only if it is already loaded)."""
    import sys

    dn = sys.modules.get("nvidia.dali.data_node")
    return dn is not None and isinstance(value, dn.DataNode)


def op_error(op, message, cls=ValueError):
    return cls(f"gpuaug.dali.{op}: {message}")


def batch_layout(op, layout) -> str:
    """``layout`` ("HWC"/"CHW", or the op's "NHWC"/"NCHW") -> "NHWC"/"NCHW", checked."""
    if is_node(layout) or not isinstance(layout, str) or layout not in LAYOUTS:
        raise op_error(op, f"layout: got {layout!r}; expected 'HWC' (default) or 'CHW' "
                           "(per-sample layouts; 'NHWC'/'NCHW' are accepted too)")
    lay = LAYOUTS[layout]
    allowed = REGISTRY[op].layouts
    if lay not in allowed:
        raise op_error(op, f"layout: got {layout!r}; this op accepts "
                           f"{', '.join(SAMPLE_LAYOUT[a] for a in allowed)}")
    return lay


@dataclass(frozen=True, eq=False)
class Step:
    """One op of a DALI graph fragment (see module docstring)."""

    op: str
    consts: dict          # parameter name -> constant value
    node_params: tuple    # parameter names fed as DataNodes, in input order
    layout: str           # the op's input layout, "NHWC" or "NCHW"
    seed: int | None = None  # base seed for ops with a host-only ``seed`` parameter

    @property
    def spec(self):
        return REGISTRY[self.op]

    @property
    def out_layout(self) -> str:
        """The layout the op writes (see module docstring)."""
        names = self.spec.param_names
        if "output_layout" in names:
            v = self.consts.get("output_layout", self.spec.params[names.index("output_layout")].default)
            if v is not None:
                return LAYOUTS[v]
        return self.layout


def _base_seed(op, seed):
    if seed is not None:
        if isinstance(seed, (bool, np.bool_)) or not isinstance(seed, (int, np.integer)) or not 0 <= seed < 2 ** 64:
            raise op_error(op, f"seed: got {seed!r}; expected an int in [0, 2**64) (batch i uses seed + i)",
                           TypeError)
        return int(seed)
    from nvidia.dali.pipeline import Pipeline

    pipe = Pipeline.current()
    pseed = getattr(pipe, "seed", -1) if pipe is not None else -1
    if pseed is None or pseed < 0:
        return int(np.random.SeedSequence().generate_state(1, np.uint64)[0])
    return int(np.random.SeedSequence([int(pseed), 0x67707561]).generate_state(1, np.uint64)[0])


def make_step(op, params: dict, layout) -> tuple:
    """Check ``params`` for ``op``; return ``(Step, [DataNode, ...])``."""
    spec = REGISTRY[op]
    by_name = {p.name: p for p in spec.params}
    lay = batch_layout(op, layout)
    consts, names, nodes = {}, [], []
    seed = None
    for name, value in params.items():
        p = by_name.get(name)
        if p is None:
            raise op_error(op, f"unknown argument {name!r}; expected one of "
                               f"{', '.join(spec.param_names + RESERVED) or '(none)'}", TypeError)
        if is_node(value):
            if p.kind == "size" or not p.per_sample:
                why = ("it decides the output shape" if p.kind == "size" else
                       "it is one setting for the whole batch")
                raise op_error(op, f"argument {name!r} got a DataNode; {name} is host-only ({why}), so it "
                                   f"must be a constant (e.g. {name}={p.default!r})", TypeError)
            names.append(name)
            nodes.append(value)
            continue
        if name == "output_layout" and value in ("HWC", "CHW"):  # DALI's spelling
            value = LAYOUTS[value]
        if p.kind == "choice" and p.choices and value not in p.choices:
            raise op_error(op, f"argument {name!r} got {value!r}; expected one of "
                               f"{', '.join(map(repr, p.choices))}")
        if name == "seed" and p.kind == "int" and not p.per_sample:
            seed = _base_seed(op, value)
            continue
        consts[name] = value
    if seed is None and "seed" in by_name and by_name["seed"].kind == "int" and not by_name["seed"].per_sample:
        seed = _base_seed(op, None)
    return Step(op, consts, tuple(names), lay, seed), nodes


def check_param_node_device(op, name, node, data_device):
    if node.device == "gpu" and data_device == "cpu":
        raise op_error(op, f"argument {name!r} is a GPU DataNode but the data is on the CPU; DALI cannot "
                           "move GPU data to a CPU operator here: give a CPU node (DALI's fn.random.* "
                           "and fn.transforms.* make CPU nodes)", TypeError)
