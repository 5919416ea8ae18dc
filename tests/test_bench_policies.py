"""``gpuaug bench --policies`` (gpuaug/bench/policies.py) on the CPU: the dry run through the
CLI (checks, rows for every gpuaug policy and mixing, the DALI peers where DALI is installed,
JSON + Markdown written), and the document checks."""
import json
import pytest

from gpuaug.bench import policies


def test_dry_run_through_the_cli(tmp_path, capsys):
    from gpuaug.cli import main

    rc = main(["bench", "--policies", "--dry-run", "--batch", "3", "--size", "24", "--out", str(tmp_path)])
    assert rc == 0
    with open(tmp_path / "policies.json") as f:
        doc = json.load(f)
    assert policies.validate(doc) == []
    assert doc["dry_run"] and doc["device_kind"] == "cpu" and doc["n"] == 3 and doc["size"] == 24
    mine = {r["policy"] for r in doc["rows"] if r["library"] == "gpuaug"}
    assert set(policies.gpuaug_policies()) | {"MixUp(0.8)", "CutMix(1.0)", "Mosaic()", "Mosaic() + boxes"} <= mine
    assert all(v.startswith("ok") for v in doc["checks"].values()) and len(doc["checks"]) >= 7
    import importlib.util

    if importlib.util.find_spec("nvidia.dali") is None:
        assert "dali" in doc["errors"]
    else:
        assert "dali" not in doc["errors"], doc["errors"].get("dali")
        for lib in ("gpuaug.dali", "dali"):
            got = {r["policy"] for r in doc["rows"] if r["library"] == lib}
            assert {"RandAugment(2, 9)", "TrivialAugmentWide", "AutoAugment(imagenet)"} <= got, lib
            assert all(r["method"] == "marginal" for r in doc["rows"] if r["library"] == lib)
        assert doc["checks"]["gpuaug.dali.rand_augment"].startswith("ok")
    md = (tmp_path / "policies.md").read_text()
    out = capsys.readouterr().out
    for r in doc["rows"]:
        assert f"| {r['library']} | {r['policy']} |" in md
    assert "| gpuaug | RandAugment(2, 9) |" in out and "wrote" in out
    assert doc["targets"] == {}  # evaluated on GPU runs only


def test_validate_and_targets():
    row = {"library": "gpuaug", "policy": "RandAugment(2, 9)", "variant": "CUDA C", "ms": 0.2, "method": "events"}
    doc = {"kind": policies.KIND, "rows": [row], "checks": {"a": "ok"}, "targets": {}, "errors": {}}
    assert policies.validate(doc) == []
    bad = dict(doc, rows=[dict(row, ms=float("nan"))], checks={"a": "FAILED: 3 values differ"})
    problems = policies.validate(bad)
    assert any("not a positive finite time" in p for p in problems) and any("checks['a']" in p for p in problems)
    assert policies.validate(dict(doc, kind="x"))[0].startswith("kind:")
    rows = [row, {"library": "kornia", "policy": "RandAugment(2, 9)", "variant": "", "ms": 4.0, "method": "events"},
            {"library": "dali", "policy": "RandAugment(2, 9)", "variant": "", "ms": 0.5, "method": "marginal"},
            {"library": "gpuaug.dali", "policy": "RandAugment(2, 9)", "variant": "", "ms": 0.05, "method": "marginal"},
            {"library": "gpuaug", "policy": policies.COPY, "variant": "", "ms": 0.1, "method": "events"},
            {"library": "gpuaug", "policy": "MixUp(0.8)", "variant": "", "ms": 0.2, "method": "events"}]
    t = policies.targets({"rows": rows})
    assert t["RandAugment(2, 9) device time <= 0.25 ms"]["met"]
    assert t["RandAugment(2, 9) >= 10x kornia (per sample)"] == {"text": "20.0x", "met": True}
    assert t["RandAugment(2, 9) >= 5x DALI auto_aug (gpuaug device time vs DALI's marginal cost)"] == \
        {"text": "2.5x (gpuaug 0.200 ms, DALI 0.500 ms)", "met": False}
    both = [v for k, v in t.items() if k.startswith("RandAugment(2, 9) >= 5x DALI auto_aug (both marginal")]
    assert both == [{"text": "10.0x (gpuaug.dali 0.050 ms, DALI 0.500 ms)", "met": True}]
    assert t["MixUp(0.8) <= 1.5x a same-size copy"] == {"text": "2.00x", "met": False}


def test_bad_arguments():
    for kw, pat in ((dict(n=1), "n: got 1; expected at least 2"), (dict(size=0), "size: got 0; expected an int >= 1"),
                    (dict(iters=-2), "iters: got -2"), (dict(device="tpu"), "device: got 'tpu'")):
        with pytest.raises(ValueError, match=pat):
            policies.run(dry_run=True, peers=False, **kw)
