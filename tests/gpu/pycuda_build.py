"""The Python steps of tests/gpu/pycuda_build.sh (the script calls them; see its header).

    python3 tests/gpu/pycuda_build.py find-cuda-h        pip's CUDA toolkit cuda.h (first found), or nothing
    python3 tests/gpu/pycuda_build.py wheel JOBS DIST    in pycuda's unpacked source: build its wheel into DIST
                                                         with the C++ sources compiled JOBS at a time
    python3 tests/gpu/pycuda_build.py driver             one line: the CUDA driver and device pycuda sees

Every step runs as ``python3 - <<EOF`` ran it before: ``sys.path[0]`` is the working directory
(``""``), not this file's folder, so the wheel build imports pycuda's setup helpers
(aksetup_helper) from the source directory it runs in.
"""
import os
import sys

sys.path[0] = ""


def find_cuda_h():
    """Print the first ``nvidia/*/include/cuda.h`` of pip's CUDA toolkit packages on the path."""
    import glob
    import site

    for p in sys.path + site.getsitepackages():
        for h in glob.glob(p + "/nvidia/*/include/cuda.h") + glob.glob(p + "/nvidia/cuda_runtime/include/cuda.h"):
            print(h)
            return


def wheel(jobs, dist):
    """Build the wheel with the C++ sources compiled in parallel (see the header of pycuda_build.sh)."""
    import time
    from multiprocessing.pool import ThreadPool

    import setuptools  # noqa: F401 - installs its distutils before the import below
    from distutils import ccompiler

    jobs = int(jobs)
    C = ccompiler.CCompiler
    if jobs > 1 and hasattr(C, "_setup_compile") and hasattr(C, "_get_cc_args"):
        def compile(self, sources, output_dir=None, macros=None, include_dirs=None, debug=0,
                    extra_preargs=None, extra_postargs=None, depends=None):
            macros, objects, extra_postargs, pp_opts, build = self._setup_compile(
                output_dir, macros, include_dirs, sources, depends, extra_postargs)
            cc_args = self._get_cc_args(pp_opts, debug, extra_preargs)

            def one(obj):
                if obj in build:
                    src, ext = build[obj]
                    self._compile(obj, src, ext, cc_args, extra_postargs, pp_opts)

            with ThreadPool(jobs) as pool:
                list(pool.imap_unordered(one, objects))
            return objects

        C.compile = compile
        print(f"parallel compile: {jobs} jobs", flush=True)
    else:
        print("parallel compile: not patched (serial)", flush=True)

    from setuptools import build_meta

    t = time.time()
    os.makedirs(dist, exist_ok=True)
    name = build_meta.build_wheel(dist)
    print(f"built {name} in {time.time() - t:.0f} s", flush=True)


def driver():
    """Print the CUDA driver, the version pycuda was built for and device 0."""
    import pycuda.driver as drv

    drv.init()
    d = drv.Device(0)
    print(f"pycuda driver: CUDA {drv.get_driver_version()}, built for {drv.get_version()}, "
          f"{drv.Device.count()} device(s), {d.name()} cc {d.compute_capability()}")


STEPS = {"find-cuda-h": find_cuda_h, "wheel": wheel, "driver": driver}

if __name__ == "__main__":
    if len(sys.argv) < 2 or sys.argv[1] not in STEPS:
        sys.exit(f"usage: {sys.argv[0]} {{{'|'.join(STEPS)}}} [args]")
    STEPS[sys.argv[1]](*sys.argv[2:])
