"""Timing helpers shared by the GPU bench scripts under tests/gpu/ (run as scripts: this folder
is on their sys.path)."""
from __future__ import annotations

import statistics


def torch_event_ms(fn, iters, warmup):
    """Median ms per call between CUDA events around each call on PyTorch's current stream
    (gaps included: host-bound peers such as kornia are timed as a training loop sees them)."""
    import torch

    for _ in range(warmup):
        fn()
    torch.cuda.synchronize()
    times = []
    for _ in range(iters):
        a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        a.record()
        fn()
        b.record()
        b.synchronize()
        times.append(a.elapsed_time(b))
    return statistics.median(times)
