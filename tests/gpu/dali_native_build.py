"""tests/gpu/dali_native.sh: build the native DALI operator and print its status (on a failed
build, the compiler's whole output).
"""
import os as _os
import sys as _sys

_sys.path.insert(0, _os.path.join(_os.path.dirname(_os.path.abspath(__file__)), "..", ".."))

import subprocess
from gpuaug.dali import native, _native
try:
    print("plugin:", native.build(verbose=True))
except Exception as e:
    print("BUILD FAILED:", str(e).splitlines()[0])
    try:  # the compiler's whole output (the exception keeps only its tail)
        cmd, _ = native.build_command("/tmp/gpuaug_dali_build_check.so")
        r = subprocess.run(cmd, capture_output=True, text=True)
        print(" ".join(cmd))
        print(r.stdout)
        print(r.stderr)
    except Exception as e2:
        print("cannot even form the build command:", e2)
print("status:", _native.status())
