"""The README's examples that can run on a CPU machine, taken from the README itself."""
import os
import re
import subprocess
import sys

import numpy as np
import pytest

README = os.path.join(os.path.dirname(__file__), "..", "README.md")


def _blocks():
    text = open(README, encoding="utf-8").read()
    return re.findall(r"```python\n(.*?)```", text, re.S)


def test_dali_example_cpu_variant_runs(tmp_path):
    """The DALI example with the three lines the README says to change for a machine without a
    GPU: it must build and run a CPU pipeline (was: it failed with device_id=None)."""
    pytest.importorskip("nvidia.dali")
    from PIL import Image

    gpu_ex = next(b for b in _blocks() if "@pipeline_def(batch_size=128" in b and "labels.gpu()" in b)
    cpu_ex = next(b for b in _blocks() if "device_id=None" in b and "device=\"cpu\"" in b)
    changes = [re.sub(r"\s+#.*", "", line).strip() for line in cpu_ex.splitlines() if line.strip() != "..."]
    assert len(changes) == 3, changes
    code = gpu_ex
    for old, new in [("@pipeline_def(batch_size=128, num_threads=4, device_id=0)", changes[0]),
                     ('images = fn.decoders.image(jpegs, device="mixed")', changes[1]),
                     ("return images, labels.gpu()", changes[2])]:
        assert code.count(old) == 1, old
        code = code.replace(old, new)
    code = code.replace("batch_size=128", "batch_size=4")   # a small batch for CI
    rng = np.random.default_rng(0)
    for c in "ab":
        os.makedirs(tmp_path / "train" / c)
        for i in range(3):
            Image.fromarray(rng.integers(0, 256, (40 + i, 50, 3), dtype=np.uint8)).save(tmp_path / "train" / c / f"{i}.jpg")
    code += ("\np = pipe()\np.build()\nimages, labels = p.run()\nimport numpy as np\n"
             "a = np.asarray(images.as_tensor())\nprint('OK', a.shape, a.dtype)\n")
    r = subprocess.run([sys.executable, "-c", code], cwd=tmp_path, capture_output=True, text=True, timeout=600)
    assert r.returncode == 0, r.stderr[-3000:]
    assert "OK (4, 3, 224, 224) float32" in r.stdout, r.stdout


def test_fakedevice_import_named_in_the_readme_works():
    text = open(README, encoding="utf-8").read()
    m = re.search(r"`(from gpuaug[.\w]* import FakeDevice)`", text)
    assert m, "the README should say where FakeDevice is imported from"
    ns = {}
    exec(m.group(1), ns)
    import gpuaug

    s = gpuaug.Scheduler(np.arange(8 * 2 * 2 * 3, dtype=np.uint8).reshape(8, 2, 2, 3), None, batch_size=4,
                         device=ns["FakeDevice"]())
    got = np.concatenate([np.asarray(images) for images, _ in s])
    np.testing.assert_array_equal(got, np.arange(8 * 2 * 2 * 3, dtype=np.uint8).reshape(8, 2, 2, 3))
