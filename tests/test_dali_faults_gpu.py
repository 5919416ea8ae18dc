"""gpuaug.dali on the GPU under faults (marked gpu + dali; skipped without them).

The cases of tests/test_dali.py's FAULTS (an op's own check, NaN in a per-sample DataNode,
the channel count or a parameter's shape changing at batch 2, a composed chain, the numba
backend) in GPU pipelines: the runs before the fault are right, the faulty run raises a
RuntimeError naming the op, the failed pipeline keeps raising, and a new pipeline of the
same op, built afterwards in the same process, gives the standalone op's output.

Each case runs in its own Python process: DALI 2.4 has been seen to abort the process on
an exception raised out of a GPU python_function (tests/gpu/dali_debug.py), and one abort
must fail one test, not end the session. The child prints each step it got through, so a
crash says where it happened.

    python3 tests/test_dali_faults_gpu.py CASE     # one case, in this process
"""
from __future__ import annotations

import os
import signal
import subprocess
import sys

import pytest

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)

from test_dali import FAULTS  # noqa: E402

pytestmark = [pytest.mark.gpu, pytest.mark.dali]


#: Faults that a GPU pipeline does not see: per-sample values arrive there as CuPy arrays, and
#: checking them (NaN) would read them back, a stream wait; docs/errors.md says so.
NOT_CHECKED_ON_GPU = {c for c in FAULTS if "nan" in c}


@pytest.mark.parametrize("case", sorted(FAULTS))
def test_gpu_error_then_pipeline_rebuilt(case):
    if case in NOT_CHECKED_ON_GPU:
        pytest.skip("per-sample values on the GPU are not checked for NaN (no stream wait; docs/errors.md)")
    p = subprocess.run([sys.executable, os.path.abspath(__file__), case], capture_output=True, text=True,
                       timeout=300, cwd=os.path.dirname(HERE), env=dict(os.environ, PYTHONFAULTHANDLER="1"))
    steps = [line for line in p.stdout.splitlines() if line.startswith("step: ")]
    if p.returncode < 0:
        sig = signal.Signals(-p.returncode).name
        if any("raised, naming the op" in line for line in steps):
            # gpuaug's part held: the error surfaced as a DALI error naming the op (and, where
            # the log goes on, a rebuilt pipeline ran right); DALI 2.4 then crashed while
            # tearing a pipeline down, as it does after any GPU python_function raised
            # (tests/gpu/dali_debug.py, stage raise_plain; seen on the H200, 2026-11-22).
            pytest.xfail(f"{case}: DALI 2.4 died with {sig} at teardown after {steps[-1]}")
        pytest.fail(f"{case}: the process died with {sig} after {steps[-1] if steps else 'no step'} "
                    f"(a DALI abort on an exception out of a GPU python_function?)\n{p.stderr[-4000:]}")
    last = steps[-1] if steps else "no step"
    assert p.returncode == 0, f"{case}: after {last}\n{p.stdout[-2000:]}\n{p.stderr[-4000:]}"
    assert "step: done" in p.stdout


def main(case):
    from test_dali import run_fault_case

    def log(msg):
        print(f"step: {msg}", flush=True)

    log("start")
    # GPUAUG_TEST_CPU=1: the same in a CPU pipeline (to try this harness without a GPU)
    run_fault_case(case, device_id=None if os.environ.get("GPUAUG_TEST_CPU") else 0, log=log)
    log("done")


if __name__ == "__main__":
    main(sys.argv[1])
