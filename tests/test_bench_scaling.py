"""gpuaug bench --e2e --gpus on the CPU (gpuaug.bench.scaling, gpuaug.bench.ddp): the GPU-count
list and its errors, the dry run's commands, the table's arithmetic from RESULT documents
like the runs write, the end-to-end document's scaling section, and real torchrun runs of
the rank runner on 1 and 2 CPU processes (gloo) through the bench's code path.
The same on GPUs: tests/gpu/multi_gpu.sh."""
from __future__ import annotations

import importlib.util
import json
import os
import shlex
import sys

import pytest

from gpuaug.bench import ddp, scaling
from gpuaug.bench import e2e as E
from gpuaug.cli import main


def _has_torch():
    return importlib.util.find_spec("torch") is not None


# -- --gpus LIST ------------------------------------------------------------------------------


@pytest.mark.parametrize("text,want", [("1,2,4", (1, 2, 4)), ("4,1", (1, 4)), (" 2 ", (2,)), ((1, 2), (1, 2))])
def test_parse_gpus(text, want):
    assert scaling.parse_gpus(text) == want


@pytest.mark.parametrize("text", ["", "0", "1,0", "-2", "a", "1,,2", "1.5", "1,2,2", "2,1,2"])
def test_parse_gpus_refuses(text):
    with pytest.raises(ValueError, match=r"^gpus: got "):
        scaling.parse_gpus(text)


@pytest.mark.parametrize("text,says", [("0", "expected a comma-separated list of GPU counts >= 1"),
                                       ("1,x", "expected a comma-separated list"), ("1,1", "1 is listed twice")])
def test_cli_bad_gpu_list_is_a_usage_error(text, says, capsys):
    with pytest.raises(SystemExit) as e:
        main(["bench", "--e2e", "--gpus", text])
    err = capsys.readouterr().err
    assert e.value.code == 2 and "--gpus" in err and says in err, err


def _nothing_may_run(monkeypatch):
    """Any folder generation, folder scan or launch fails the test."""
    def boom(*a, **k):
        raise AssertionError("something ran before the --gpus check")
    for mod, name in ((E, "synthetic_folder"), (E, "folder_info"), (scaling, "launch")):
        monkeypatch.setattr(mod, name, boom)


def test_cli_count_above_visible_gpus_fails_before_anything_runs(monkeypatch, tmp_path, capsys):
    monkeypatch.setattr(scaling, "visible_gpus", lambda: 2)
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "0,1")
    _nothing_may_run(monkeypatch)
    rc = main(["bench", "--e2e", "--gpus", "1,2,4", "--out", str(tmp_path / "out")])
    err = capsys.readouterr().err
    assert rc == 2
    assert "gpus: got 4, but 2 GPUs are visible (torch.cuda.device_count(), CUDA_VISIBLE_DEVICES='0,1')" in err
    assert not (tmp_path / "out").exists()


def test_no_gpu_visible(monkeypatch):
    monkeypatch.setattr(scaling, "visible_gpus", lambda: 0)
    monkeypatch.delenv("CUDA_VISIBLE_DEVICES", raising=False)
    with pytest.raises(ValueError, match=r"^gpus: got 1, but 0 GPUs are visible \(torch.cuda.device_count\(\)\); "
                                         r"expected counts up to 0$"):
        scaling.check("1")
    assert scaling.check("1,8", dry_run=True) == ((1, 8), list(scaling.DEFAULT_PATHS))  # not asked


def test_visible_gpus_without_torch_names_it(monkeypatch):
    monkeypatch.setitem(sys.modules, "torch", None)  # import torch -> ImportError
    with pytest.raises(ValueError, match=r"^gpus: the multi-GPU runs need PyTorch .*pip install torch"):
        scaling.visible_gpus()


def test_path_selection_and_refusals(monkeypatch, tmp_path, capsys):
    assert scaling.select_paths(None) == ["scheduler_gpu", "gpuaug_dali_rrc"]
    assert scaling.select_paths(["dali", "gpuaug_dali_rrc", "scheduler_gpu"]) == ["gpuaug_dali_rrc", "scheduler_gpu"]
    with pytest.raises(ValueError, match=r"^gpus: none of the paths \['dali', 'torchvision'\] runs on several GPUs"):
        scaling.select_paths(["dali", "torchvision"])
    with pytest.raises(ValueError, match=r"^paths: scheduler_gpu decodes on the GPU"):
        scaling.check("1,2", ["scheduler_gpu", "gpuaug_dali_rrc"], cpu=True)
    _nothing_may_run(monkeypatch)
    monkeypatch.setattr(scaling, "visible_gpus", lambda: 4)
    assert main(["bench", "--e2e", "--paths", "dali", "--gpus", "1,2"]) == 2
    assert "none of the paths ['dali'] runs on several GPUs" in capsys.readouterr().err
    assert main(["bench", "--e2e", "--paths", "scheduler_memory"]) == 2
    assert "scheduler_memory is a path of the multi-GPU scaling only" in capsys.readouterr().err
    assert main(["bench", "--gpus", "1,2"]) == 2
    assert "--gpus is an option of the end-to-end benchmark: use it with --e2e" in capsys.readouterr().err
    assert main(["bench", "--e2e", "--steps", "5"]) == 2
    assert "--steps: the timed steps per rank of the multi-GPU runs; use it with --gpus" in capsys.readouterr().err
    assert main(["bench", "--e2e", "--timeout", "5"]) == 2
    assert "--timeout: the time limit of one torchrun of the multi-GPU runs" in capsys.readouterr().err
    assert main(["bench", "--timeout", "5"]) == 2
    assert "--timeout is an option of the end-to-end benchmark" in capsys.readouterr().err


# -- --dry-run: the commands, none run ----------------------------------------------------------


def test_cli_dry_run_lists_the_torchrun_commands(monkeypatch, tmp_path, capsys):
    def no_gpu_count():
        raise AssertionError("the dry run asked for the visible GPUs")
    monkeypatch.setattr(scaling, "visible_gpus", no_gpu_count)
    monkeypatch.setattr(scaling, "launch", lambda *a, **k: pytest.fail("the dry run launched a command"))
    monkeypatch.setenv("GPUAUG_CACHE", str(tmp_path / "cache"))
    out_dir = tmp_path / "out"
    rc = main(["bench", "--e2e", "--dry-run", "--images", "16", "--batch", "4", "--size", "24x24", "--epochs", "1",
               "--paths", "scheduler_gpu,gpuaug_dali_rrc,scheduler_memory", "--gpus", "1,2,8", "--steps", "7",
               "--warmup", "2", "--timeout", "99", "--out", str(out_dir)])
    io = capsys.readouterr()
    assert rc == 0, io.err
    doc = json.load(open(out_dir / "e2e.json"))
    folder = doc["folder"]["root"]
    # the single-process rows: scheduler_gpu and gpuaug_dali_rrc (scheduler_memory is scaling only)
    assert [r["path"] for r in doc["rows"]] == ["scheduler_gpu", "gpuaug_dali_rrc"]
    sec = doc["scaling"]
    assert sec["gpus"] == [1, 2, 8] and sec["dry_run"] is True and sec["steps"] == 7 and sec["warmup"] == 2
    assert sec["timeout"] == 99 and sec["workers"] is None and sec["not_scaled"] == []
    assert [(r["path"], r["gpus"], r["status"]) for r in sec["rows"]] == [
        (p, n, "dry run") for p in ("scheduler_gpu", "gpuaug_dali_rrc", "scheduler_memory") for n in (1, 2, 8)]
    assert E.validate(doc) == []
    printed = [shlex.split(line) for line in io.out.splitlines() if "-m torch.distributed.run" in line]
    assert printed == [r["command"] for r in sec["rows"]]  # every command printed, in order
    for cmd, r in zip(printed, sec["rows"]):
        assert cmd[:6] == [sys.executable, "-m", "torch.distributed.run", "--standalone",
                           f"--nproc_per_node={r['gpus']}", "-m"] and cmd[6] == "gpuaug.bench.ddp"
        opts = dict(zip(cmd[7::2], cmd[8::2]))
        assert opts["--batch"] == "4" and opts["--size"] == "24" and opts["--steps"] == "7"
        assert opts["--warmup"] == "2" and "--cpu" not in cmd and "--workers" not in cmd
        assert opts["--json"] == os.path.join(str(out_dir), "scaling", f"scale-{r['path']}-{r['gpus']}.json")
        want = {"scheduler_gpu": {"--loader": "scheduler", "--decode": "gpu", "--folder": folder},
                "gpuaug_dali_rrc": {"--loader": "dali", "--folder": folder},
                "scheduler_memory": {"--loader": "scheduler", "--synthetic": "16"}}[r["path"]]
        assert {k: opts.get(k) for k in want} == want
    assert "commands (dry run: not run):" in io.out
    assert list((out_dir / "scaling").iterdir()) == []  # nothing ran, no log
    md = open(out_dir / "e2e.md").read()
    assert "| scheduler_memory | 8 | - | - | - | - | - | - | dry run |" in md


def test_runner_command_line_is_the_runners():
    """Every option a command carries is one the rank runner (and so examples/ddp_train.py) parses."""
    import argparse

    ap = ddp.add_arguments(argparse.ArgumentParser())
    for path in scaling.RUNNER_ARGS:
        cmd = scaling.command(path, 2, "/data", images=64, batch=8, size=32, load_size=40, steps=3, warmup=1,
                              workers=3, seed=5, cpu=True, json_path="/tmp/r.json")
        args = ap.parse_args(cmd[cmd.index("gpuaug.bench.ddp") + 1:])
        assert (args.batch, args.size, args.load_size, args.steps, args.warmup, args.workers, args.seed) == \
            (8, 32, 40, 3, 1, 3, 5)
        assert args.cpu and args.json == "/tmp/r.json"
        assert (args.folder, args.synthetic) == ((None, 64) if path == "scheduler_memory" else ("/data", 2048))
    with pytest.raises(ValueError, match="^images: got None; scheduler_memory needs"):
        scaling.command("scheduler_memory", 1, "/data")


# -- the table's arithmetic ---------------------------------------------------------------------


def _result(world, ips, waits, check_ok=True, contexts="own"):
    ranks = [{"rank": r, "device": r, "images": 5120, "seconds": 1.0, "images_per_s": ips / world,
              "data_wait_s": 0.1, "data_wait_pct": w, "losses": [],
              "contexts": None if contexts is None else [r] if contexts == "own" else contexts}
             for r, w in enumerate(waits)]
    return {"loader": "scheduler", "world": world, "model": "none", "batch": 256, "size": 224, "n": 4096, "steps": 20,
            "warmup": 5, "what": "gpuaug.Scheduler (folder, GPU decode)", "images_per_s": ips, "ranks": ranks,
            "check": {"ok": check_ok, "samples": [4096 // world] * world}, "placement_ok": True}


def _rec(path, n, result, rc=0, why=None):
    return {"path": path, "gpus": n, "command": ["torchrun", f"--nproc_per_node={n}"], "rc": rc, "result": result,
            "seconds": 30.0, "log": f"/logs/scale-{path}-{n}.txt", "why": why}


def test_summary_efficiency_from_results():
    """The H200 x4 runs of issue 20: Scheduler GPU decode 5,943 / 10,924 / 22,662 img/s on 1 / 2 / 4
    GPUs is 92% / 95% efficient, the DALI loader's 13,519 / 25,355 / 45,177 is 94% / 84%."""
    recs = [_rec("scheduler_gpu", 1, _result(1, 5943.0, [3.0])),
            _rec("scheduler_gpu", 2, _result(2, 10924.0, [4.0, 6.0])),
            _rec("scheduler_gpu", 4, _result(4, 22662.0, [5.0, 5.0, 7.0, 9.0])),
            _rec("gpuaug_dali_rrc", 1, _result(1, 13519.0, [1.0])),
            _rec("gpuaug_dali_rrc", 2, _result(2, 25355.0, [1.0, 2.0], contexts=None)),
            _rec("gpuaug_dali_rrc", 4, _result(4, 45177.0, [2.0] * 4, contexts=[0, 3]))]
    rows = scaling.summarize(recs)
    got = {(r["path"], r["gpus"]): r for r in rows}
    assert [round(100 * got["scheduler_gpu", n]["efficiency"]) for n in (1, 2, 4)] == [100, 92, 95]
    assert [round(100 * got["gpuaug_dali_rrc", n]["efficiency"]) for n in (1, 2, 4)] == [100, 94, 84]
    assert got["scheduler_gpu", 4]["per_gpu"] == pytest.approx(22662 / 4)
    assert got["scheduler_gpu", 2]["efficiency"] == pytest.approx(10924 / (2 * 5943))
    assert got["scheduler_gpu", 4]["data_wait_pct"] == [5.0, 5.0, 7.0, 9.0]
    assert all(r["status"] == "ok" and r["check"] == "ok" for r in rows)
    # placement: own GPU only -> True; not probed (CPU ranks) -> None; a context elsewhere -> False
    assert got["scheduler_gpu", 4]["placement_ok"] is True
    assert got["gpuaug_dali_rrc", 2]["placement_ok"] is None
    assert got["gpuaug_dali_rrc", 4]["placement_ok"] is False
    sec = {"gpus": [1, 2, 4], "paths": ["scheduler_gpu", "gpuaug_dali_rrc"], "batch": 256, "size": 224, "steps": 20,
           "warmup": 5, "runner": scaling.RUNNER, "rows": rows}
    assert scaling.validate(sec) == []
    md = scaling.format_table(sec)
    assert "efficiency = images/s(N) / (N x images/s(1))" in md
    assert "| scheduler_gpu | 2 | 10,924 | 5,462 | 92% | 4, 6 | ok | yes | ok |" in md
    assert "| gpuaug_dali_rrc | 4 | 45,177 | 11,294 | 84% | 2, 2, 2, 2 | ok | NO | ok |" in md
    assert "| gpuaug_dali_rrc | 2 | 25,355 | 12,678 | 94% | 1, 2 | ok | - | ok |" in md
    assert "loaders: scheduler_gpu: gpuaug.Scheduler (folder, GPU decode)" in md


def test_summary_failures_and_a_base_above_one():
    """Failed runs give no images/s and leave the others' efficiency alone; without a 1-GPU
    run the efficiency is against the smallest count that ran."""
    recs = [_rec("p", 2, _result(2, 1000.0, [1.0, 1.0])),
            _rec("p", 4, _result(4, 1800.0, [1.0] * 4)),
            _rec("p", 8, None, rc=1, why="RuntimeError: NCCL error"),
            _rec("q", 2, _result(2, 500.0, [1.0, 1.0], check_ok=False), rc=1),
            _rec("q", 4, _result(4, 900.0, [1.0] * 4)),
            _rec("r", 2, None, rc=None, why="timed out after 600 s"),
            _rec("r", 4, None, rc=0)]
    got = {(r["path"], r["gpus"]): r for r in scaling.summarize(recs)}
    assert got["p", 4]["efficiency"] == pytest.approx(1800 * 2 / (4 * 1000))  # 90%
    assert got["p", 8]["status"] == "error: exit 1: RuntimeError: NCCL error"
    assert got["p", 8]["images_per_s"] is None and got["p", 8]["efficiency"] is None
    assert got["q", 2]["status"].startswith("error: the epoch check failed") and got["q", 2]["check"] == "FAILED"
    assert got["q", 2]["images_per_s"] is None and got["q", 4]["efficiency"] == 1.0  # q's base is now 4
    assert got["r", 2]["status"] == "error: timed out after 600 s"
    assert got["r", 4]["status"] == "error: exit 0 but no RESULT"
    sec = {"gpus": [2, 4, 8], "paths": ["p", "q", "r"], "batch": 256, "size": 224, "steps": 20, "warmup": 5,
           "runner": scaling.RUNNER, "rows": list(got.values())}
    assert scaling.validate(sec) == []
    assert "efficiency = images/s(N) / (N/2 x images/s(2))" in scaling.format_table(sec)
    broken = json.loads(json.dumps(sec))
    broken["rows"][1]["efficiency"] = None
    del broken["rows"][0]["check"]
    probs = scaling.validate(broken)
    assert "rows[1].efficiency: None for an ok row" in probs and "rows[0]: missing check" in probs


def test_repeated_runs_give_the_median_run_and_list_every_run():
    """repeat: one row per path and count, the median run's (its waits and log too), every run's
    images/s in run order; the efficiency from the medians; a failed run makes the row that
    run's error (with the images/s of the runs that passed)."""
    def rec(n, ips, waits, k, **kw):
        r = _rec("p", n, _result(n, ips, waits) if ips else None, **kw)
        r["log"] = f"/logs/scale-p-{n}-run{k}.txt"
        return r

    recs = [rec(1, 21399.0, [1.0], 1), rec(4, 51360.0, [9.0] * 4, 1),
            rec(1, 22931.0, [2.0], 2), rec(4, 74590.0, [8.0] * 4, 2),
            rec(1, 17265.0, [3.0], 3), rec(4, 61022.0, [7.0] * 4, 3),
            _rec("q", 1, _result(1, 100.0, [1.0])), _rec("q", 2, _result(2, 190.0, [1.0, 1.0])),
            _rec("q", 1, _result(1, 110.0, [1.0])), _rec("q", 2, None, rc=1, why="NCCL error")]
    got = {(r["path"], r["gpus"]): r for r in scaling.summarize(recs)}
    assert len(got) == 4
    assert got["p", 1]["runs"] == [21399.0, 22931.0, 17265.0] and got["p", 1]["images_per_s"] == 21399.0
    assert got["p", 4]["runs"] == [51360.0, 74590.0, 61022.0] and got["p", 4]["images_per_s"] == 61022.0
    assert got["p", 4]["data_wait_pct"] == [7.0] * 4 and got["p", 4]["log"] == "/logs/scale-p-4-run3.txt"
    assert got["p", 4]["efficiency"] == pytest.approx(61022 / (4 * 21399))
    assert got["p", 1]["seconds"] == 90.0
    assert got["q", 1]["images_per_s"] == 100.0 and got["q", 1]["runs"] == [100.0, 110.0]  # the lower middle
    assert got["q", 2]["status"] == "error: exit 1: NCCL error" and got["q", 2]["runs"] == [190.0]
    assert got["q", 2]["efficiency"] is None
    sec = {"gpus": [1, 4], "paths": ["p"], "batch": 256, "size": 224, "steps": 60, "warmup": 5, "repeat": 3,
           "runner": scaling.RUNNER, "rows": [got["p", 1], got["p", 4]]}
    assert scaling.validate(sec) == []
    md = scaling.format_table(sec)
    assert "each row the median of 3 runs" in md
    assert "| p | 4 | 61,022 (runs: 51,360, 74,590, 61,022) | 15,256 | 71% |" in md


def test_repeat_is_checked_and_a_dry_run_lists_each_command_once(tmp_path):
    for bad in (0, -1, 1.5, True, "2"):
        with pytest.raises(ValueError, match="repeat: got"):
            scaling.run(str(tmp_path), "1,2", images=64, dry_run=True, repeat=bad, log=lambda m: None)
    lines = []
    sec = scaling.run(str(tmp_path), "1,2", paths=["gpuaug_dali_rrc"], images=64, dry_run=True, repeat=3,
                      log_dir=str(tmp_path / "logs"), log=lines.append)
    assert sec["repeat"] == 3 and len(lines) == 2 and len(sec["rows"]) == 2


def test_why_a_run_failed():
    log = ("[rank1]: Traceback (most recent call last):\n"
           "[rank1]:   File \"x.py\", line 3, in <module>\n"
           "SystemExit: --folder: '/x' has no class folders with images\n"
           "torch.distributed.elastic.multiprocessing.errors.ChildFailedError: \n"
           "============================================================\n")
    assert scaling._why(log) == "SystemExit: --folder: '/x' has no class folders with images"
    assert scaling._why("just this\n\n") == "just this" and scaling._why("") == "no output"


#: a "torchrun" that starts a "rank" (prints its pid) and both sleep
_SLEEPERS = ("import subprocess, sys, time; c = subprocess.Popen([sys.executable, '-c', 'import time; "
             "time.sleep(120)']); print(c.pid, flush=True); time.sleep(120)")


def _gone(pid, within=10.0):
    """True once ``pid`` has exited (gone, or a zombie nobody reaped)."""
    import time

    deadline = time.monotonic() + within
    while time.monotonic() < deadline:
        try:
            with open(f"/proc/{pid}/stat") as f:
                if f.read().rsplit(")", 1)[1].split()[0] == "Z":
                    return True
        except FileNotFoundError:
            return True
        time.sleep(0.1)
    return False


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc")
def test_launch_ends_a_run_past_its_timeout(tmp_path):
    """The command's whole process group (torchrun and its ranks) is ended; the record says
    it timed out."""
    rec = scaling.launch([sys.executable, "-c", _SLEEPERS], str(tmp_path / "slow"), timeout=3)
    assert rec["rc"] is None and rec["why"] == "timed out after 3 s" and rec["result"] is None
    assert rec["seconds"] < 60
    assert _gone(int(open(rec["log"]).read().split()[0])), "the rank outlived its torchrun"


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc")
def test_launch_ends_the_run_when_this_process_gets_sigterm(tmp_path):
    """A SIGTERM to the bench (an outer `timeout`) ends the torchrun's group before the bench
    exits, and the handler is put back."""
    import signal
    import threading

    before = signal.getsignal(signal.SIGTERM)
    stem = str(tmp_path / "term")
    threading.Timer(2.0, os.kill, (os.getpid(), signal.SIGTERM)).start()
    with pytest.raises(SystemExit) as e:
        scaling.launch([sys.executable, "-c", _SLEEPERS], stem, timeout=60)
    assert e.value.code == 128 + signal.SIGTERM
    assert signal.getsignal(signal.SIGTERM) is before
    assert _gone(int(open(stem + ".txt").read().split()[0])), "the rank outlived the bench"


def test_a_stale_result_is_not_read(tmp_path):
    stem = str(tmp_path / "scale-p-1")
    with open(stem + ".json", "w") as f:
        json.dump(_result(1, 1.0, [1.0]), f)
    rec = scaling.launch([sys.executable, "-c", "raise SystemExit('no GPU here')"], stem, timeout=60)
    assert rec["rc"] == 1 and rec["result"] is None and rec["why"] == "no GPU here"


def test_rank_runner_stops_on_an_epoch_without_batches():
    with pytest.raises(SystemExit, match="epoch 3 gave this rank no batch"):
        next(ddp.batches([], epoch=3))


def test_rank_env_keeps_what_is_set():
    env = scaling.rank_env({"OMP_NUM_THREADS": "7", "PATH": "/bin"})
    assert env == {"OMP_NUM_THREADS": "7", "PATH": "/bin", "NCCL_NVLS_ENABLE": "0",
                   "TORCH_SYMM_MEM_DISABLE_MULTICAST": "1"}


# -- real runs of the rank runner on the CPU, through the bench --------------------------------


@pytest.mark.skipif(not _has_torch(), reason="needs PyTorch (torch.distributed.run, gloo) for torchrun")
@pytest.mark.parametrize("path", ["scheduler_cpu_threads", pytest.param("gpuaug_dali_rrc", marks=pytest.mark.dali)])
def test_scaling_runs_the_rank_runner_on_one_and_two_cpu_processes(path, tmp_path):
    """scaling.run(cpu=True): torchrun of gpuaug.bench.ddp --cpu with 1 and 2 ranks on a
    synthetic folder of the end-to-end benchmark; each run's epoch check passes, the rows
    carry the runs' RESULTs and the efficiency is computed from them."""
    root = E.make_folder(str(tmp_path / "f"), 24, seed=1, classes=3, min_side=24, max_side=40, workers=1)
    lines = []
    sec = scaling.run(root, "1,2", paths=[path], batch=4, size=16, load_size=20, steps=2, warmup=1, workers=1,
                      cpu=True, log_dir=str(tmp_path / "logs"), timeout=300, log=lines.append)
    assert scaling.validate(sec) == []
    rows = sec["rows"]
    assert [(r["path"], r["gpus"]) for r in rows] == [(path, 1), (path, 2)]
    for r in rows:
        assert r["status"] == "ok", (r["status"], open(r["log"]).read()[-3000:])
        res = r["result"]
        assert res["world"] == r["gpus"] and [x["rank"] for x in res["ranks"]] == list(range(r["gpus"]))
        assert res["model"] == "none" and all(x["images"] == 2 * 4 for x in res["ranks"])
        assert r["check"] == "ok" and res["check"]["duplicates"] == 0 and res["check"]["outside"] == 0
        assert res["check"]["dropped"] == 24 - r["gpus"] * 4 * ((24 // r["gpus"]) // 4)
        assert r["images_per_s"] == res["images_per_s"] > 0 and len(r["data_wait_pct"]) == r["gpus"]
        assert r["placement_ok"] is None  # CPU ranks: no CUDA context probed
        assert r["command"][4] == f"--nproc_per_node={r['gpus']}" and "--cpu" in r["command"]
        assert json.load(open(os.path.join(str(tmp_path / "logs"), f"scale-{path}-{r['gpus']}.json"))) == res
    assert rows[0]["efficiency"] == 1.0
    assert rows[1]["efficiency"] == pytest.approx(rows[1]["images_per_s"] / (2 * rows[0]["images_per_s"]))
    assert sum("-> ok" in m for m in lines) == 2
    md = scaling.format_table(sec)
    assert "ranks on the CPU (--cpu)" in md and f"| {path} | 2 | " in md


def test_paths_without_a_runner_are_named_not_scaled(tmp_path):
    lines = []
    sec = scaling.run(str(tmp_path), "1,2", paths=["dali", "gpuaug_dali_rrc", "torchvision"], images=64,
                      dry_run=True, log_dir=str(tmp_path / "logs"), log=lines.append)
    assert sec["paths"] == ["gpuaug_dali_rrc"] and sec["not_scaled"] == ["dali", "torchvision"]
    assert lines[0] == "scaling: dali, torchvision not scaled (no multi-GPU runner); scaling gpuaug_dali_rrc"
    assert [(r["path"], r["gpus"], r["status"]) for r in sec["rows"]] == [("gpuaug_dali_rrc", 1, "dry run"),
                                                                         ("gpuaug_dali_rrc", 2, "dry run")]
