"""gpuaug: GPU image augmentation kernels (CUDA C + Numba twins) for CuPy, DALI and PyTorch."""
from setuptools import setup

setup(
    name="gpuaug",
    version="0.1.0",
    description="Hand-written CUDA kernels for batched image augmentation on the GPU",
    long_description=open("README.md", encoding="utf-8").read(),
    long_description_content_type="text/markdown",
    license="Apache-2.0",
    python_requires=">=3.10",
    packages=["gpuaug", "gpuaug.ops", "gpuaug.policy", "gpuaug.scheduler", "gpuaug.bench", "gpuaug.bench.peers",
              "gpuaug.kernels",
              "gpuaug.kernels.numba", "gpuaug.dali", "gpuaug.dali.native"],
    package_dir={"gpuaug": "gpuaug", "gpuaug.kernels": "kernels",
                 "gpuaug.kernels.numba": "kernels/numba", "gpuaug.dali": "dali_plugins",
                 "gpuaug.dali.native": "dali_plugins/native"},
    # gpuaug.dali.native: the C++ DALI plugin's source, compiled on first use (see its __init__)
    package_data={"gpuaug.kernels": ["*.cu", "*.cuh"], "gpuaug": ["data/*.png"],
                  "gpuaug.dali.native": ["*.cc", "*.h"]},
    install_requires=[
        # numba-cuda 0.30 breaks on NumPy 2.5 (numpy.row_stack is gone)
        "numpy>=1.24,<2.5",
        "numba>=0.60",
        "numba-cuda>=0.20",
        "pillow>=9",
    ],
    extras_require={
        "cuda12": ["cupy-cuda12x>=13", "nvidia-dali-cuda120>=2.0"],
        "cuda13": ["cupy-cuda13x>=14", "nvidia-dali-cuda130>=2.0"],
        # NVRTC lets the CPU-only test run compile every CUDA C kernel (no GPU needed).
        # scipy: the filter and noise tests compare against scipy.ndimage / scipy.stats.
        "test": ["pytest>=7", "pytest-benchmark>=4", "hypothesis>=6", "matplotlib>=3.5", "scipy>=1.9",
                 "simplejpeg>=1.7",
                 "nvidia-cuda-nvrtc-cu12; platform_machine == 'x86_64'"],
        "pycuda": ["pycuda>=2024.1"],
        # Scheduler file sources: simplejpeg (manylinux wheels bundling libjpeg-turbo; decodes
        # with the GIL released, DCT-domain downscale) for decode="cpu"/"process"; nvImageCodec
        # (nvJPEG and friends through [all]) for decode="gpu".
        "cpu-decode": ["simplejpeg>=1.7"],
        "gpu-decode12": ["nvidia-nvimgcodec-cu12[all]>=0.5"],
        "gpu-decode13": ["nvidia-nvimgcodec-cu13[all]>=0.6"],
        "bench": ["matplotlib>=3.5", "tqdm>=4"],  # gpuaug bench --plot and its progress bar
    },
    entry_points={"console_scripts": ["gpuaug=gpuaug.cli:main"]},
)
