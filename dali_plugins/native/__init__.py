"""Building gpuaug's native DALI operator plugin (``libgpuaug_dali.so``) on first use.

The plugin is one C++ file, :file:`gpuaug_dali.cc` (next to this module): a generic DALI GPU
operator, ``gpuaug__Kernel`` (``fn.gpuaug.kernel`` in Python), that runs gpuaug's CUDA C
kernels through NVRTC and the CUDA driver API, and ``gpuaug__Policy`` (``fn.gpuaug.policy``),
one fused stage of a ``gpuaug.Compose`` (kernels/fused.cu), its per-sample parameter rows
built in C++ (:file:`gpuaug_host.h`) from DALI-drawn uniforms. It is compiled with the host C++ compiler
against the *installed* DALI's headers and library (``nvidia.dali.sysconfig``), as
``torch.utils.cpp_extension.load`` does, into a cache directory keyed by the DALI version,
the gpuaug version, the compiler and a hash of the source and flags:

    $GPUAUG_CACHE_DIR/dali_native/<key>/libgpuaug_dali.so   (default ~/.cache/gpuaug)

Needed at build time: a C++17 compiler (``$CXX``, else ``g++``/``c++``), DALI's headers
(in every DALI wheel) and the CUDA runtime headers that DALI's headers include
(``cuda_runtime_api.h``: a CUDA toolkit, ``$CUDA_HOME``, or the ``nvidia-cuda-runtime``
wheel). No nvcc: the kernels compile at run time with NVRTC (``libnvrtc``: a CUDA toolkit or
the ``nvidia-cuda-nvrtc`` wheel), so the .cu files stay the one source of the kernels and the
plugin does not depend on the GPU's architecture. No CUDA library is linked: the driver and
NVRTC are opened at run time, so the plugin builds and loads on a machine without a GPU.

Example::

    >>> from gpuaug.dali import native
    >>> path = native.build()          # compiles once, then returns the cached library
    >>> import nvidia.dali.plugin_manager as pm
    >>> pm.load_library(path)
"""
from __future__ import annotations

import glob
import hashlib
import os
import shutil
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
SOURCES = ("gpuaug_dali.cc",)
HEADERS = ("gpuaug_host.h",)  # included by the source: part of the cache key
LIBRARY = "libgpuaug_dali.so"
# DALI 2.4's headers use C++20 bit-field initialisers, which g++ accepts in C++17 mode with a warning.
# -ffp-contract=off: the host maths (parameter rows) rounds as NumPy does, no fused multiply-adds.
CXXFLAGS = ("-std=c++17", "-O2", "-fPIC", "-shared", "-fvisibility=hidden", "-Wno-c++20-extensions",
            "-ffp-contract=off")


class NativeUnavailable(RuntimeError):
    """The plugin cannot be built or loaded here; the message says why and what would fix it."""


def cache_root() -> str:
    return os.path.join(os.environ.get("GPUAUG_CACHE_DIR") or os.path.join(os.path.expanduser("~"), ".cache",
                                                                           "gpuaug"), "dali_native")


def compiler() -> str:
    """The C++ compiler to use: ``$CXX``, else ``g++`` or ``c++`` on PATH."""
    for c in (os.environ.get("CXX"), "g++", "c++"):
        if c and shutil.which(c):
            return shutil.which(c)
    raise NativeUnavailable("no C++ compiler found ($CXX, g++ or c++ on PATH); install g++ "
                            "(e.g. apt-get install g++) to build gpuaug's native DALI operator")


def _cuda_include_candidates():
    for var in ("CUDA_HOME", "CUDA_PATH", "CUDA_ROOT"):
        if os.environ.get(var):
            yield os.path.join(os.environ[var], "include")
    yield "/usr/local/cuda/include"
    yield from sorted(glob.glob("/usr/local/cuda-*/include"), reverse=True)
    yield from sorted(glob.glob("/usr/local/cuda-*/targets/x86_64-linux/include"), reverse=True)
    yield "/usr/include"
    try:  # CuPy 14 finds the CUDA wheels' headers through cuda-pathfinder
        from cuda.pathfinder import find_nvidia_header_directory

        d = find_nvidia_header_directory("cudart")
        if d:
            yield d
    except Exception:  # noqa: BLE001 - not installed, or an older API
        pass
    for p in sys.path:  # the nvidia-cuda-runtime wheels (CUDA 12: cuda_runtime/, CUDA 13: cu13/)
        yield from sorted(glob.glob(os.path.join(p, "nvidia", "cu*", "include")), reverse=True)
        yield os.path.join(p, "nvidia", "cuda_runtime", "include")


def cuda_include_dir() -> str:
    """A directory holding ``cuda_runtime_api.h`` (DALI's headers include it)."""
    for d in _cuda_include_candidates():
        if os.path.isfile(os.path.join(d, "cuda_runtime_api.h")):
            return d
    raise NativeUnavailable("cuda_runtime_api.h not found (DALI's headers include it); set CUDA_HOME to a CUDA "
                            "toolkit, or pip install nvidia-cuda-runtime-cu12 (CUDA 12) / the CUDA 13 runtime wheel")


def dali_config():
    """(version, include dir, lib dir, compile flags, link flags) of the installed DALI."""
    try:
        import nvidia.dali as dali
        from nvidia.dali import sysconfig
    except ImportError as e:
        raise NativeUnavailable(f"DALI is not installed ({e}); pip install -e '.[cuda12]' or '.[cuda13]'") from e
    inc = sysconfig.get_include_dir()
    if not os.path.isfile(os.path.join(inc, "dali", "pipeline", "operator", "operator.h")):
        raise NativeUnavailable(f"DALI's C++ headers are missing ({inc}); this DALI wheel cannot build plugins")
    return (dali.__version__, inc, sysconfig.get_lib_dir(), list(sysconfig.get_compile_flags()),
            list(sysconfig.get_link_flags()))


def _gpuaug_version():
    try:
        from importlib.metadata import version

        return version("gpuaug")
    except Exception:  # noqa: BLE001 - a source checkout without metadata
        return "0+unknown"


def build_command(out_path):
    """The compiler command line that builds the plugin into ``out_path``."""
    cxx = compiler()
    dver, inc, lib, cflags, lflags = dali_config()
    cuda_inc = cuda_include_dir()
    extra_libs = [f"-l{n[3:-3]}" for n in ("libdali_core.so", "libdali_kernels.so")
                  if os.path.isfile(os.path.join(lib, n))]
    return [cxx, *CXXFLAGS, *cflags, f"-I{cuda_inc}", *[os.path.join(HERE, s) for s in SOURCES],
            "-o", out_path, *lflags, *extra_libs, f"-Wl,-rpath,{lib}", "-ldl"], dver


def build_key(cmd, dali_version):
    h = hashlib.sha256()
    for s in SOURCES + HEADERS:
        with open(os.path.join(HERE, s), "rb") as f:
            h.update(f.read())
    h.update(" ".join(cmd[:1] + cmd[1:]).encode())
    return f"dali{dali_version}-gpuaug{_gpuaug_version()}-{h.hexdigest()[:16]}"


def build(verbose=False) -> str:
    """Build the plugin if it is not in the cache; return the library's path.

    Raises :class:`NativeUnavailable` naming what is missing (compiler, headers) or, when the
    compiler fails, with its output.
    """
    cmd, dver = build_command("OUT")
    key = build_key([c for c in cmd if c != "OUT"], dver)
    target = os.path.join(cache_root(), key, LIBRARY)
    if os.path.isfile(target):
        return target
    os.makedirs(os.path.dirname(target), exist_ok=True)
    fd, tmp = tempfile.mkstemp(suffix=".so", dir=os.path.dirname(target))
    os.close(fd)
    cmd = [tmp if c == "OUT" else c for c in cmd]
    if verbose:
        print(" ".join(cmd), file=sys.stderr)
    try:
        r = subprocess.run(cmd, capture_output=True, text=True)
        if r.returncode != 0:
            raise NativeUnavailable(f"building {LIBRARY} failed (exit {r.returncode}):\n{' '.join(cmd)}\n"
                                    f"{(r.stderr or r.stdout)[-4000:]}")
        os.replace(tmp, target)  # atomic: concurrent builders each publish a complete library
    finally:
        if os.path.exists(tmp):
            os.unlink(tmp)
    return target


def nvrtc_library():
    """Path of an NVRTC library to hand the plugin (``GPUAUG_NVRTC_LIBRARY``), or None (the
    dynamic loader's search path decides)."""
    if os.environ.get("GPUAUG_NVRTC_LIBRARY"):
        return os.environ["GPUAUG_NVRTC_LIBRARY"]
    dirs = []
    for var in ("CUDA_HOME", "CUDA_PATH"):
        if os.environ.get(var):
            dirs.append(os.path.join(os.environ[var], "lib64"))
    for p in sys.path:
        dirs += glob.glob(os.path.join(p, "nvidia", "cu*", "lib")) + [os.path.join(p, "nvidia", "cuda_nvrtc", "lib")]
    dirs += ["/usr/local/cuda/lib64"] + sorted(glob.glob("/usr/local/cuda-*/lib64"), reverse=True)
    for d in dirs:
        hits = sorted(glob.glob(os.path.join(d, "libnvrtc.so*")), key=len)
        hits = [h for h in hits if "builtins" not in h and "alt" not in os.path.basename(h)]
        if hits:
            return hits[0]
    return None
