"""``gpuaug.dali.policy``: a gpuaug random policy (``gpuaug.Compose``) as one DALI operator.

Where :func:`gpuaug.dali.compose` chains registry ops with DALI-drawn per-sample values,
this runs a :class:`gpuaug.Compose` policy (``gpuaug.RandomHorizontalFlip``,
``gpuaug.RandomRotation``, ``gpuaug.ColorJitter``, ``gpuaug.Normalize``, ...) on every batch:
the policy draws its own per-sample parameters (``gpuaug.random``, seeded when the policy
is made) and fuses what it can into single passes over the pixels, natively
(``gpuaug__Policy``) or in python_function.
"""
from __future__ import annotations

from ._steps import LAYOUTS, SAMPLE_LAYOUT, op_error


class PolicyCallback:
    """``python_function`` callback: ``(images) -> list of samples`` through ``policy``."""

    def __init__(self, policy, layout, backend, device):
        self.policy, self.layout, self.backend, self.device = policy, layout, backend, device

    def __call__(self, images):
        from ._callback import batch_view, wrap_error

        try:
            if self.device == "gpu":
                import cupy as xp
            else:
                import numpy as xp
            x = batch_view(images, xp, "policy", self.layout)
            out = self.policy(x, layout=self.layout, backend=self.backend)
            return out if isinstance(out, list) else list(out)
        except Exception as e:  # noqa: BLE001 - re-raised, naming the operator
            raise wrap_error("policy", e) from e


def _out_layout(policy, layout):
    """The layout the policy writes: that of its last transform with a ``layout`` (Normalize,
    ToLayout), else the input's."""
    for t in getattr(policy, "transforms", ()):
        lay = getattr(t, "layout", None)
        if isinstance(lay, str) and lay in LAYOUTS:
            layout = LAYOUTS[lay]
    return layout


def policy(data, policy, *, layout="HWC", backend=None, output_layout=None, input_dtype="uint8", draws="policy"):
    """Run a gpuaug policy (or any ``f(batch, layout=, backend=) -> batch``) on a DataNode of
    images, once per batch: natively (``fn.gpuaug.policy``, one C++ operator per fused stage, see
    :mod:`gpuaug.dali._native`) when the plugin loads, the policy's transforms all have a native
    form and the data is HWC on the GPU; else as one ``fn.python_function`` (when the plugin
    cannot load, one warning says why).

    Both paths draw the parameters from the policy's own generator (its ``seed``): batch i gets
    what the policy's i-th call draws, so a pipeline gives what ``policy(batch)`` gives on the
    same batches. The native operator copies the generator's state when the pipeline is defined
    (so a serialized pipeline replays it; and two pipelines made from one policy draw alike,
    where python_function would share one generator between them). ``draws="dali"``: the native
    operator draws from the pipeline's seed instead (one ``fn.random.uniform`` per stage; the
    transforms' distributions, another stream).

    Args:
        data: DataNode of images (HWC samples, or CHW with ``layout="CHW"``), GPU or CPU.
        policy: a :class:`gpuaug.Compose` (its random draws are its own, from its seed).
        layout: the samples' layout, "HWC" or "CHW".
        backend: None (GPU data: native where it can, else CUDA C in python_function; CPU
            data: njit twins in python_function), "native" (the native operator, or an error
            saying why), "cuda"/"python" (python_function), "numba" or "cpu".
        output_layout: the outputs' layout when it differs from what the policy's
            Normalize/ToLayout says (default: read from the policy; python_function only).
        input_dtype: the images' dtype ("uint8" default, "float16", "float32"): the native
            operator is planned for it and checks it at run time (an error naming
            ``input_dtype`` when the images differ).
        draws: "policy" (default) or "dali" (native only; see above).

    Returns:
        DataNode of the augmented images.

    Example::

        pol = gpuaug.Compose([gpuaug.RandomHorizontalFlip(), gpuaug.RandomRotation(15),
                              gpuaug.ColorJitter(0.4, 0.4, 0.4),
                              gpuaug.Normalize((0.485, 0.456, 0.406), (0.229, 0.224, 0.225))], seed=0)

        @pipeline_def(batch_size=128, num_threads=4, device_id=0)
        def pipe():
            jpegs, labels = fn.readers.file(file_root="train/", random_shuffle=True)
            images = fn.decoders.image(jpegs, device="mixed")
            images = fn.resize(images, size=(224, 224))
            return gpuaug.dali.policy(images, pol), labels.gpu()
    """
    from nvidia.dali import fn

    from ._nodes import check_backend, data_device

    device = data_device("policy", data)
    if not callable(policy):
        raise op_error("policy", f"policy: got {type(policy).__name__}; expected a gpuaug.Compose or a callable",
                       TypeError)
    if not isinstance(layout, str) or layout not in LAYOUTS:
        raise op_error("policy", f"layout: got {layout!r}; expected 'HWC' (default) or 'CHW'")
    lay = LAYOUTS[layout]
    if output_layout is not None and (not isinstance(output_layout, str) or output_layout not in LAYOUTS):
        raise op_error("policy", f"output_layout: got {output_layout!r}; expected 'HWC' or 'CHW'")
    if draws not in ("policy", "dali"):
        raise op_error("policy", f"draws: got {draws!r}; expected 'policy' (the policy's own seed, default) or "
                                 "'dali' (the pipeline's seed; native operator only)")
    out_lay = LAYOUTS[output_layout] if output_layout is not None else _out_layout(policy, lay)
    be = check_backend("policy", backend, device)
    if device == "gpu" and backend in (None, "native"):
        from ._native import policy_node

        forced = backend == "native"
        if lay != "NHWC" or (output_layout is not None and out_lay != _out_layout(policy, lay)):
            if forced:
                raise op_error("policy", "backend='native': the native policy takes HWC images and writes the "
                               "layout its Normalize / ToLayout says (layout='CHW' or output_layout: backend='cuda')",
                               RuntimeError)
        else:
            node = policy_node(data, policy, input_dtype=input_dtype, forced=forced, draws=draws)
            if node is not None:
                return node
        be = "cuda"
    cb = PolicyCallback(policy, lay, be, device)
    return fn.python_function(data, function=cb, batch_processing=True, device=device, num_outputs=1,
                              output_layouts=SAMPLE_LAYOUT[out_lay])
