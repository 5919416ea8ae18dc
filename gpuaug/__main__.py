"""``python -m gpuaug``: the ``gpuaug`` command (see :mod:`gpuaug.cli`)."""
import sys

from gpuaug.cli import main

if __name__ == "__main__":
    sys.exit(main())
