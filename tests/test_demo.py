import numpy as np
import pytest
from PIL import Image

import gpuaug
from gpuaug.demo import DEMO_OPS, TILE, demo_plan, run_demo, sample_image, wrap


@pytest.fixture(scope="module")
def sheet(tmp_path_factory):
    return run_demo(tmp_path_factory.mktemp("demo") / "sheet.png", device="cpu", columns=5)


def test_demo_shows_every_registered_op(sheet):
    assert sheet["device"].startswith("cpu")
    assert set(sheet["ops"][1:]) == set(gpuaug.registry)          # every op, the README's promise
    assert sheet["ops"][0] == "original" and sheet["tiles"][1] == "flip horizontal=True"
    assert len(sheet["tiles"]) == len(sheet["boxes"]) == 1 + len(demo_plan())


def test_demo_plan_adds_ops_missing_from_demo_ops(monkeypatch):
    import gpuaug.demo as D

    monkeypatch.setattr(D, "DEMO_OPS", (("flip", {"horizontal": True}), ("no_such_op", {})))
    plan = D.demo_plan()
    assert plan[0] == ("flip", {"horizontal": True})
    assert [n for n, _ in plan] == ["flip"] + [n for n in gpuaug.registry if n != "flip"]
    rotate = dict(plan)["rotate"]                                   # from the registry example
    assert set(rotate) <= set(gpuaug.registry["rotate"].param_names) and rotate


def test_labels_are_wrapped_to_the_tile_not_cut(sheet):
    for label, lines, widths in zip(sheet["tiles"], sheet["lines"], sheet["line_widths"]):
        assert "".join(lines).replace(" ", "") == label.replace(" ", "")   # nothing dropped
        assert all(w <= TILE - 12 for w in widths), (label, lines, widths)
    long = [lines for lines in sheet["lines"] if len(lines) > 1]
    assert long, "some labels (matrices) are longer than a tile and must wrap"


def test_sheet_pixels(sheet):
    img = sample_image()
    im = np.asarray(Image.open(sheet["path"]).convert("RGB"))
    rows = -(-len(sheet["tiles"]) // 5)
    assert im.shape[1] == 5 * TILE and im.shape[0] > rows * TILE
    (x0, y0), (x1, y1) = sheet["boxes"][:2]
    np.testing.assert_array_equal(im[y0:y0 + TILE, x0:x0 + TILE], img)              # the original
    np.testing.assert_array_equal(im[y1:y1 + TILE, x1:x1 + TILE], img[:, ::-1])     # flipped
    # a smaller result (crop 160x140) is centred in its cell, white around it
    k = sheet["ops"].index("crop")
    xk, yk = sheet["boxes"][k]
    cell = im[yk:yk + TILE, xk:xk + TILE]
    top, left = (TILE - 160) // 2, (TILE - 140) // 2
    np.testing.assert_array_equal(cell[top:top + 160, left:left + 140], img[40:200, 60:200])
    assert (cell[:top] == 255).all() and (cell[:, :left] == 255).all()


def test_float_outputs_are_shown_scaled_and_say_so(sheet):
    lab = sheet["tiles"][sheet["ops"].index("normalize")]
    assert "(shown scaled from -" in lab


def test_wrap_breaks_long_values():
    lines = wrap("matrix=[[1,2,3],[4,5,6]] x=1", 8, len)
    assert all(len(s) <= 8 for s in lines) and "".join(lines).replace(" ", "") == "matrix=[[1,2,3],[4,5,6]]x=1"
    assert wrap("abcdefghij", 3, len) == ["abc", "def", "ghi", "j"]


def test_demo_rejects_bad_device(tmp_path):
    with pytest.raises(ValueError, match="device: got 'tpu'"):
        run_demo(tmp_path / "x.png", device="tpu")


def test_cli_demo(tmp_path, capsys):
    from gpuaug.cli import main

    assert main(["demo", "--out", str(tmp_path / "s.png"), "--device", "cpu", "--columns", "7"]) == 0
    text = capsys.readouterr().out
    assert "device: cpu" in text and str(tmp_path / "s.png") in text
    assert f"({len(gpuaug.registry)} ops, " in text
    assert Image.open(tmp_path / "s.png").size[0] == 7 * TILE


def test_demo_plan_is_in_demo_ops_order():
    names = [n for n, _ in DEMO_OPS if n in gpuaug.registry]
    assert [n for n, _ in demo_plan()][:len(names)] == names
