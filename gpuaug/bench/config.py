"""What a benchmark case is (:class:`Config`) and the constants its figures use."""
from __future__ import annotations

from dataclasses import dataclass


SCHEMA_ID = "gpuaug-bench/1"
GIB = 1 << 30
MIB = 1 << 20
STATUSES = ("ok", "error", "not installed", "unsupported", "needs GPU", "skipped", "below noise")
TOLERANCES = {"uint8": (1.0, 0.0), "float16": (2e-3, 2e-3), "float32": (1e-5, 1e-5)}


# ----------------------------------------------------------------------------- config
@dataclass
class Config:
    """What to benchmark. ``ops`` empty: every op in ``gpuaug.registry``.

    ``device``: "gpu" (CUDA events) or "cpu" (the CPU twins, wall clock). ``backends``:
    gpuaug backends to time (default: cuda + numba on a GPU, cpu on the CPU).
    ``libraries``: restrict the peers (default: every library in gpuaug.bench.peers).
    ``buffers``: input buffers rotated (0: enough to exceed 2× the L2, at least 4).
    ``budget_s``: after this many seconds, peers are skipped and repeats cut to a fifth.
    ``check_batch``/``check_bytes``: the checks run on the first samples, at most this many
    and this many input bytes. ``ref_workers``: processes computing the CPU references in
    parallel with the GPU work (-1: up to 8 on a GPU run, none on a CPU run; 0: in-process).
    """

    ops: tuple = ()
    batch: int = 256
    height: int = 224
    width: int = 224
    channels: int = 3
    dtype: str = "uint8"
    layout: str = "NHWC"
    backends: tuple | None = None
    peers: bool = False
    libraries: tuple | None = None
    repeat: int = 100
    warmup: int = 5
    device: str = "gpu"
    buffers: int = 0
    seed: int = 0
    check_batch: int = 8
    check_bytes: int = 16 * MIB
    ref_workers: int = -1
    budget_s: float | None = None
    large_copy_bytes: int = 2 * GIB
    pcie_bytes: int = 256 * MIB
    progress: bool = True

    def __post_init__(self):
        if self.device not in ("gpu", "cpu"):
            raise ValueError(f"device: got {self.device!r}; expected 'gpu' or 'cpu'")
        if self.dtype not in TOLERANCES:
            raise ValueError(f"dtype: got {self.dtype!r}; expected one of {', '.join(TOLERANCES)}")
        if self.layout not in ("NHWC", "NCHW"):
            raise ValueError(f"layout: got {self.layout!r}; expected 'NHWC' or 'NCHW'")
        for name in ("batch", "height", "width", "channels", "repeat"):
            if int(getattr(self, name)) < 1:
                raise ValueError(f"{name}: got {getattr(self, name)!r}; expected a positive int")
        if self.warmup < 0:
            raise ValueError(f"warmup: got {self.warmup!r}; expected an int >= 0")
        if self.backends is None:
            self.backends = ("cuda", "numba") if self.device == "gpu" else ("cpu",)
        self.backends = tuple(self.backends)
        for b in self.backends:
            if b not in ("cuda", "numba", "cpu"):
                raise ValueError(f"backends: got {b!r}; expected 'cuda', 'numba' or 'cpu'")
        self.ops = tuple(self.ops or ())
        if self.libraries is not None:
            self.libraries = tuple(self.libraries)

    @property
    def case(self) -> str:
        """A short name of the case, e.g. ``256x224x224x3-uint8-NHWC``."""
        return f"{self.batch}x{self.height}x{self.width}x{self.channels}-{self.dtype}-{self.layout}"

    @property
    def shape(self) -> tuple:
        n, h, w, c = self.batch, self.height, self.width, self.channels
        return (n, h, w, c) if self.layout == "NHWC" else (n, c, h, w)
