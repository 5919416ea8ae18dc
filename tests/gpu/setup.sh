#!/usr/bin/env bash
# On the GPU machine: install the kit (NumPy 2.4 for numba-cuda, DALI, kornia) and gpuaug,
# offline. Source it: `source tests/gpu/setup.sh`.
# install once per set of kit files (a second source in the same machine skips it)
_kit_stamp=$(ls /tmp/kit .kit/base .kit/dali 2>/dev/null | grep -v : | sort -u | md5sum | cut -c1-32)
if [ -f .kit/install.sh ] && [ "$(cat /tmp/site/.gpuaug-kit 2>/dev/null)" != "$_kit_stamp" ]; then
  bash .kit/install.sh && echo "$_kit_stamp" > /tmp/site/.gpuaug-kit
fi
export PYTHONPATH=/tmp/site${PYTHONPATH:+:$PYTHONPATH}
export PYTHONUNBUFFERED=1
python3 -m pip install -q --no-build-isolation --no-deps --no-index -e . 2>&1 | grep -v WARNING
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader
python3 -c "import numpy, numba, cupy; print('numpy', numpy.__version__, 'numba', numba.__version__, 'cupy', cupy.__version__)"
