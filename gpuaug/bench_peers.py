"""Old name of :mod:`gpuaug.bench.peers` (the same module object, so attributes set on one are
seen through the other)."""
import sys

from gpuaug.bench import peers as _peers

sys.modules[__name__] = _peers
