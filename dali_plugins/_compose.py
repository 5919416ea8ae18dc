"""``gpuaug.dali.compose``: several gpuaug ops as one DALI graph fragment.

Like ``torchvision.transforms.Compose``, but the ops run *fused*: consecutive gpuaug ops
become one ``fn.python_function`` whose callback calls them in turn on the batch, so the
chain pays python_function's fixed cost (the floor, ~1.7 ms per batch on an H200 with
DALI 2.4) once instead of once per op. Per-sample DataNode parameters of every op become
inputs of that one operator.

An item is
- an op name: ``"invert"``;
- ``(op name, {param: value})``: ``("rotate", {"angle": fn.random.uniform(range=(-10, 10))})``;
- a partial of a gpuaug.dali adapter or of the standalone op:
  ``functools.partial(gpuaug.dali.flip, horizontal=fn.random.coin_flip())``,
  ``functools.partial(gpuaug.brightness, factor=1.2)``;
- any other callable ``DataNode -> DataNode`` (a DALI op, a lambda): it runs as itself and
  splits the fusion there.

``backend="numba"`` chains one DALI numba_function per op instead (numba_function runs a
single op). On GPU data, ops that the native DALI operator runs (:mod:`gpuaug.dali._native`)
become one native operator each, between the python_function groups of the others;
``backend="native"`` requires that of every op, ``backend="cuda"`` (or "python") fuses all
into python_function. With ``native_chain=True`` (or ``GPUAUG_DALI_NATIVE_CHAIN=1``; off by
default until its GPU tests have run) consecutive native ops become ONE ``gpuaug__Chain``
operator (``fn.gpuaug.chain``): the same kernels and parameter rows, run one after another
inside one C++ operator with the intermediate batches in its own buffers, so the result is the
ops' bit for bit.
"""
from __future__ import annotations

import functools

import numpy as np

from gpuaug._registry import REGISTRY

from ._steps import RESERVED, is_node, op_error


def _op_of(func):
    """Registry name of a gpuaug.dali adapter or a standalone gpuaug op, else None."""
    name = getattr(func, "__gpuaug_op__", None)
    if name is not None:
        return name
    for op, spec in REGISTRY.items():
        if spec.func is func:
            return op
    return None


def _known(name, i):
    """ValueError naming the item, the unknown op, the nearest names and every op."""
    if name not in REGISTRY:
        import difflib

        near = difflib.get_close_matches(name, list(REGISTRY), n=3)
        raise ValueError(f"compose: item {i}: got op {name!r}; "
                         + (f"did you mean {' or '.join(map(repr, near))}? " if near else "")
                         + f"expected one of {', '.join(sorted(REGISTRY))}")


def _parse(item, i):
    """item -> (op name, params, layout or None) or (None, callable, None)."""
    if isinstance(item, str):
        _known(item, i)
        return item, {}, None
    if isinstance(item, tuple) and len(item) == 2 and isinstance(item[0], str):
        name, params = item
        _known(name, i)
        if not isinstance(params, dict):
            raise TypeError(f"compose: item {i} ({name!r}): got params {type(params).__name__}; expected a dict")
        params = dict(params)
        return name, params, params.pop("layout", None)
    if isinstance(item, functools.partial):
        name = _op_of(item.func)
        if name is not None:
            if item.args:
                raise TypeError(f"compose: item {i} (partial of {name}): give parameters by keyword")
            params = dict(item.keywords)
            for k in ("backend", "input_dtype"):
                if k in params:
                    raise TypeError(f"compose: item {i} ({name}): {k}= is set on compose(), not per op")
            return name, params, params.pop("layout", None)
    if callable(item):
        name = _op_of(item)
        if name is not None:
            return name, {}, None
        return None, item, None
    raise TypeError(f"compose: item {i}: got {type(item).__name__}; expected an op name, (name, params), "
                    "a functools.partial of a gpuaug op, or a callable DataNode -> DataNode")


class Compose:
    """A chain of ops applied as ``Compose(items)(images) -> DataNode`` (see module docstring).

    Args:
        items: the ops, in order (see module docstring for the forms).
        backend: as for every gpuaug.dali op (None: CUDA C on GPU data, njit on CPU data).
        layout: the input samples' layout, "HWC" (default) or "CHW"; later ops get the
            layout their predecessor writes.
        input_dtype: the images' dtype, for backend="numba".
        native_chain: consecutive native ops as one ``gpuaug__Chain`` operator (None: from
            ``GPUAUG_DALI_NATIVE_CHAIN``, off by default).

    Example::

        aug = gpuaug.dali.compose([
            ("flip", {"horizontal": fn.random.coin_flip()}),
            ("rotate", {"angle": fn.random.uniform(range=(-15, 15)), "border": "reflect"}),
            ("color_jitter", {"brightness": fn.random.uniform(range=(0.8, 1.2))}),
            ("crop_mirror_normalize", {"mean": [123.7, 116.3, 103.5], "std": [58.4, 57.1, 57.4]}),
        ])
        images = aug(images)    # one python_function for the four ops
    """

    def __init__(self, items, *, backend=None, layout="HWC", input_dtype="uint8", native_chain=None):
        self.items = [_parse(it, i) for i, it in enumerate(items)]
        self.backend, self.layout, self.input_dtype = backend, layout, input_dtype
        if native_chain not in (None, True, False):
            raise TypeError(f"compose: native_chain: got {native_chain!r}; expected None, True or False")
        self.native_chain = native_chain
        self.operators = 0  # DALI operators made by the last call

    @classmethod
    def from_parsed(cls, items, *, backend=None, layout="HWC", input_dtype="uint8", native_chain=None):
        """A Compose over already parsed items ``(op name, params, layout or None)`` /
        ``(None, callable, None)`` (as in :attr:`items`)."""
        c = cls([], backend=backend, layout=layout, input_dtype=input_dtype, native_chain=native_chain)
        c.items = list(items)
        return c

    def __call__(self, data):
        from ._nodes import check_backend, python_function_node, step_for

        self.operators = 0
        layout = self.layout
        pending, nodes = [], []
        chain = []  # consecutive native steps' fn.gpuaug.kernel arguments, for one gpuaug__Chain
        use_chain = self.native_chain
        if use_chain is None:
            from ._native import chain_enabled

            use_chain = chain_enabled()

        def flush(x):
            if chain:
                from ._native import chain_node

                x = chain_node(x, list(chain))
                self.operators += 1
                chain.clear()
            if not pending:
                return x
            be = check_backend(pending[0].op, self.backend, x.device)
            out = python_function_node(list(pending), x, list(nodes), be)
            self.operators += 1
            pending.clear()
            nodes.clear()
            return out

        x = data
        dt = self.input_dtype  # numba_function compiles per dtype: follow it along the chain
        for name, params, lay in self.items:
            if name is None:
                x = params(flush(x))
                self.operators += 1
                continue
            for k in RESERVED:
                if k in params:
                    raise op_error(name, f"{k}= is set on compose(), not per op", TypeError)
            step, step_nodes = step_for(name, x, params, lay or layout)
            layout = step.out_layout
            if self.backend == "numba":
                from ._numba import _out_dtype, numba_node

                check_backend(name, "numba", x.device)
                x = numba_node(step, x, step_nodes, dt)
                dt = _out_dtype(step, np.dtype(dt)).name
                self.operators += 1
                continue
            if x.device == "gpu" and self.backend in (None, "native"):
                # an op the native DALI operator runs leaves the python_function fusion: as its own
                # C++ operator (or a step of one gpuaug__Chain) it costs less than its share of a
                # Python callback
                from ._native import MAX_CHAIN_INPUTS, chainable, native_kwargs

                kw = native_kwargs(step, step_nodes, forced=self.backend == "native")
                if kw is not None:
                    if pending:
                        x = flush(x)
                    if use_chain and chainable(kw):
                        if sum(is_node(v) for c in chain + [kw] for v in c.values()) > MAX_CHAIN_INPUTS:
                            x = flush(x)  # the chain's argument inputs are full: a new chain
                        chain.append(kw)
                    else:
                        from nvidia.dali import fn

                        x = fn.gpuaug.kernel(flush(x), **kw)
                        self.operators += 1
                    continue
            if chain:
                x = flush(x)
            pending.append(step)
            nodes.extend(step_nodes)
        return flush(x)


def compose(items, *, backend=None, layout="HWC", input_dtype="uint8", native_chain=None):
    """Chain gpuaug ops (and DALI functions) as one DALI graph fragment; see :class:`Compose`."""
    return Compose(items, backend=backend, layout=layout, input_dtype=input_dtype, native_chain=native_chain)
