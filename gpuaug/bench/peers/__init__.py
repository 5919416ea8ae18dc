"""Peers for ``gpuaug bench --peers``: the same op in the libraries people use instead.

:data:`PEERS` maps a registry op name to ``{library: make}``. ``make(batch, kwargs)``
gets a :class:`PeerInput` (the benchmark's rotated input buffers) and the op's keyword
arguments (the per-sample values gpuaug is timed with, from ``OpSpec.example``) and
returns either

- a zero-argument callable that runs the peer once on the next buffer (see
  :func:`cycle`), timed like gpuaug with CUDA events (on the CPU: a wall clock), or
- a :class:`Marginal` (DALI): two pipelines, with and without the op, timed by the
  difference of their wall times.

It may raise :class:`NotInstalled`, :class:`Unsupported` or :class:`NeedsGPU`; the row then
says so instead of failing. Any other exception becomes an "error" row with its message.

Each peer is given its best case, so that a speed-up of gpuaug over it is not flattered:
its input is prepared outside the timing in the layout and dtype it wants (contiguous
NCHW tensors for torchvision; float32 in [0, 1] for kornia, which works in float), and
where its API takes one value for the whole batch it gets sample 0's value (gpuaug applies
one value per sample). Each row's note says which of these applied. Peer conventions
(pixel centres, rounding, what "brightness" means) differ; peers are timed, not checked.

Libraries: torchvision (``transforms.v2.functional`` on CUDA tensors), torch (plain
PyTorch where torchvision has no such op), kornia, cupy (``cupyx.scipy.ndimage`` and CuPy
array expressions), dali (built-in operators, GPU or CPU pipelines; a CPU pipeline gets
:data:`CPU_THREADS` threads), cvcuda, opencv (``cv2`` on the CPU, one call per image with
that image's values, :data:`CPU_THREADS` threads; optional: its rows say "not installed"
without it). Nothing is
imported until a peer is made.

One module per library (``torchvision``, ``torch``, ``kornia``, ``cupy``, ``dali``, ``cvcuda``,
``opencv``) registers its peers with :func:`peer`; ``_common`` holds the table, the input
wrapper and the helpers that read an op's arguments. ``gpuaug.bench_peers`` is this package
under its old name.

Example::

    >>> import numpy as np
    >>> from gpuaug.bench import peers as bp
    >>> sorted(bp.peers_for("flip"))
    ['cupy', 'cvcuda', 'dali', 'kornia', 'opencv', 'torchvision']
    >>> x = [np.random.default_rng(0).integers(0, 256, (2, 8, 8, 3), dtype=np.uint8)]
    >>> bp.PeerInput(x, "NHWC", gpu=False).n
    2
"""
from __future__ import annotations

from ._common import (CPU_THREADS, FLOAT_IN, LIBRARIES, ONE_PER_BATCH, PEERS, Marginal, NeedsGPU,  # noqa: F401
                      NotInstalled, PeerInput, PeerUnavailable, Unsupported, _affine_size, _boxes, _cmn_window,
                      _erase_boxes, _forward, _import, _interp, _k, _ksize, _kornia, _mat3, _mean_std, _pad_sides,
                      _sigma_k, _t, _tvf, cycle, f0, hw, i0, missing, peer, peers_for, per_sample, s0)

# Importing each library's module registers its peers in PEERS (none imports its library here).
from . import torchvision, torch, kornia, cupy, dali, cvcuda, opencv  # noqa: E402,F401  isort: skip
from .cupy import _ndi, _ndi_matrix  # noqa: E402,F401
from .cvcuda import _cv  # noqa: E402,F401
from .dali import _dali_arg, dali_peer  # noqa: E402,F401

__all__ = ["PEERS", "LIBRARIES", "peer", "peers_for", "missing", "PeerInput", "cycle", "Marginal",
           "dali_peer", "PeerUnavailable", "NotInstalled", "Unsupported", "NeedsGPU"]
