"""Old name of :mod:`gpuaug.bench.e2e` (the same module object, so attributes set on one are
seen through the other)."""
import sys

from gpuaug.bench import e2e as _e2e

sys.modules[__name__] = _e2e
