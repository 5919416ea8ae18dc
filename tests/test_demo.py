import numpy as np
from PIL import Image

import gpuaug
from gpuaug.demo import DEMO_OPS, TILE, run_demo, sample_image


def test_demo_writes_labelled_sheet(tmp_path):
    info = run_demo(tmp_path / "sheet.png", device="cpu", columns=3)
    assert info["device"].startswith("cpu")
    present = [n for n, _ in DEMO_OPS if n in gpuaug.registry]
    assert len(info["tiles"]) == 1 + len(present)
    assert info["tiles"][1] == "flip horizontal=True"
    sheet = np.asarray(Image.open(info["path"]).convert("RGB"))
    rows = (len(info["tiles"]) + 2) // 3
    assert sheet.shape == (rows * (TILE + 22), 3 * TILE, 3)
    # Tile 1 (row 0, column 1) is the horizontally flipped photo.
    img = sample_image()
    tile = sheet[22:22 + TILE, TILE:2 * TILE]
    np.testing.assert_array_equal(tile, img[:, ::-1])
    np.testing.assert_array_equal(sheet[22:22 + TILE, :TILE], img)


def test_demo_rejects_bad_device(tmp_path):
    import pytest

    with pytest.raises(ValueError, match="device: got 'tpu'"):
        run_demo(tmp_path / "x.png", device="tpu")


def test_cli_demo(tmp_path, capsys):
    from gpuaug.cli import main

    assert main(["demo", "--out", str(tmp_path / "s.png"), "--device", "cpu"]) == 0
    text = capsys.readouterr().out
    assert "device: cpu" in text and str(tmp_path / "s.png") in text
    assert (tmp_path / "s.png").stat().st_size > 10000
