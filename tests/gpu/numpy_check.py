"""Warn when NumPy is too new for numba-cuda (the numba rows of the op bench would fail).
"""
import numpy
if tuple(int(v) for v in numpy.__version__.split(".")[:2]) >= (2, 5):
    print(f"WARNING: numpy {numpy.__version__}: numba-cuda 0.30 needs < 2.5, so the numba rows will "
          "fail; carry the kit (.kit/base + .kit/install.sh)")
