"""make gpu-check up to the GPU: the system executor, the plan, the budget on paper, the barrier self-test and the
clock's barrier audit (with fake devices), and the whole check with a fake interpreter standing in for a GPU
machine's Python."""

import copy
import hashlib
import json
import os
import queue
import subprocess
import sys
import threading
import time
import zipfile

import pytest
import yaml
from conftest import ROOT

from scripts import gpu_check
from scripts import run as runs
from scripts.plan import planfile as plans
from scripts.plan.matrix import Cell, MatrixError, load, parse
from scripts.results import records
from shared import barrier_check, datasets, timing

pytestmark = pytest.mark.unit

DEFAULT = {"cnn": ("fp32",), "gru": ("fp32",), "resnet50": ("bf16",)}
TUNED = {"cnn": ("amp", "bf16"), "gru": ("fp32",), "resnet50": ("bf16",)}
EXPECTED = {
    (f, t, p, tuning)
    for f in ("pytorch", "jax")
    for tuning, tasks in (("default", DEFAULT), ("tuned", TUNED))
    for t, ps in tasks.items()
    for p in ps
} | {
    ("keras-jax", "cnn", "amp", "default"),
    ("keras-torch", "cnn", "amp", "default"),  # Keras from the wheels
    ("chainer", "cnn", "fp32", "default"),
}  # Chainer from its source
MEASURED = 6  # cells an H200 reference holds; the Keras, Chainer and tuned ones are estimated by the model


def test_the_plan_lists_the_right_cells_in_the_system_executor(tmp_path):
    plan_file = plans.make(load(), gpu_check.PROFILE, "gpu-check-test", executor="system")
    cells = [c.cell for c in plan_file.cells]
    assert {(c.framework, c.task, c.precision, c.tuning) for c in cells} == EXPECTED
    assert {(c.variant, c.device, c.data, c.scale, c.gpus) for c in cells} == {
        ("system", "gpu", "synthetic", "full", 1)
    }
    assert plan_file.plan.executor == "system" and {c.image for c in plan_file.cells} == {""}
    plans.write(tmp_path / "plan.json", plan_file)  # a plan without images reads back
    assert plans.read(tmp_path / "plan.json").cells == plan_file.cells
    ordered = gpu_check.ordered(cells)
    assert [c.precision for c in ordered] == ["fp32"] * 7 + ["amp"] * 4 + ["bf16"] * 6
    pairs = [(a.id, b.id) for a, b in zip(ordered, ordered[1:], strict=False) if f"{a.id}-tuned" == b.id]
    assert len(pairs) == 4 == sum(c.tuning == "tuned" and c.task != "cnn" for c in cells)  # each beside its default


def test_any_local_profile_runs_in_a_given_interpreter_as_variant_system():
    plan_file = plans.make(load(), "demo", "demo-x", executor="system")
    assert {c.cell.variant for c in plan_file.cells} == {"system"}
    assert len(plan_file.cells) == len(plans.make(load(), "demo", "demo-y").cells)


def test_a_system_profile_names_no_image_variant():
    doc = yaml.safe_load((ROOT / "matrix.yaml").read_text())
    doc = copy.deepcopy(doc)
    doc["profiles"]["gpu-check"]["variants"] = ["cu130"]
    with pytest.raises(MatrixError, match="system executor runs cells in an interpreter"):
        parse(doc)


def test_the_check_fits_two_device_calls_on_paper(capsys):
    assert gpu_check.main(["--dry-run"]) == 0
    out = capsys.readouterr().out
    assert f"{len(EXPECTED)} cells in 2 parts of at most 6 minutes (at most 2)" in out
    assert f"{MEASURED} cells measured in a GPU reference" in out  # the H200's, results/reference
    on_paper = [float(line.split()[2]) for line in out.splitlines() if line.startswith("part ")]
    assert len(on_paper) == 2 and all(seconds <= 6 * 60 for seconds in on_paper)
    assert gpu_check.main(["--dry-run", "--budget-minutes", "3"]) == 1  # more than two parts: refused


def test_parts_are_cut_in_order_within_the_budget():
    cells = [
        Cell("pytorch", "cnn", "system", "fp32", 1, "gpu", "synthetic", "full", tuning=t) for t in ("default", "tuned")
    ]
    cells += [Cell("jax", task, "system", "fp32", 1, "gpu", "synthetic", "full") for task in ("cnn", "gru")]
    estimates = dict(zip((c.id for c in cells), (100, 200, 50, 1000), strict=False))
    cut = gpu_check.parts(cells, estimates, 350)  # 15 s of data and tests + 100 + 200 fit, + 50 would not
    assert [[c.id for c in part] for part in cut] == [[c.id for c in cells[:2]], [cells[2].id], [cells[3].id]]
    assert gpu_check.parts(cells, estimates, 10_000) == [cells]


def test_the_model_covers_a_cell_without_a_measurement():
    cell = next(c.cell for c in plans.make(load(), gpu_check.PROFILE, executor="system").cells if c.cell.task == "cnn")
    steps = 50_000 // 64 * 10
    assert gpu_check.estimate_seconds(cell, 5) >= gpu_check.START_SECONDS[cell.framework] + steps * 1e-3


# ---------------------------------------------------------------- the whole check, a fake interpreter


@pytest.fixture
def fake_gpu_machine(tmp_path, monkeypatch):
    """A fake interpreter (tests/fake/runners answers `python -m runners`), one fake GPU, small "full-size" twins."""
    python = tmp_path / "python3"
    python.write_text(f'#!/bin/sh\ncd {ROOT / "tests" / "fake"} && exec {sys.executable} "$@"\n')
    python.chmod(0o755)
    # nvidia-smi of one H100: the GPU facts an ok GPU record must carry (records.GPU_FACTS_REQUIRED)
    smi = tmp_path / "bin" / "nvidia-smi"
    smi.parent.mkdir()
    smi.write_text(
        '#!/bin/sh\ncase "$*" in\n  *driver_version,*|*=name*) echo "NVIDIA H100 80GB HBM3, 81559, 1980, 2619, 9.0, '
        '550.54.15" ;;\n  *driver_version*) echo 550.54.15 ;;\n  *) echo 0 ;;\nesac\n'
    )
    smi.chmod(0o755)
    monkeypatch.setenv("PATH", f"{smi.parent}{os.pathsep}{os.environ['PATH']}")
    monkeypatch.setenv("ROSETTA_GPU_IDS_AVAILABLE", "0")
    monkeypatch.setitem(datasets.FULL_SIZE, "cifar10", {"train": 640, "test": 128})
    monkeypatch.setitem(datasets.FULL_SIZE, "imdb", {"train": 640, "test": 128})
    monkeypatch.setattr(records, "OWN_RECORDS_ONLY", False)
    monkeypatch.setattr(gpu_check, "install_wheels", lambda python, site: None)  # Keras "installed" (tested below)
    monkeypatch.setattr(gpu_check, "install_sources", lambda site: None)  # Chainer too …
    monkeypatch.setattr(gpu_check, "chainer_probe", lambda python, site: None)  # … and running (tested below)
    return ["--python", str(python), "--results", str(tmp_path / "results"), "--data-root", str(tmp_path / "data")]


def the_run(tmp_path):
    (run_dir,) = (tmp_path / "results").iterdir()
    return run_dir, json.loads((run_dir / "gpu-check.json").read_text())


def test_the_check_runs_every_cell_in_the_given_interpreter(tmp_path, fake_gpu_machine):
    assert gpu_check.main(fake_gpu_machine) == 0
    run_dir, summary = the_run(tmp_path)
    got = [records.read(p) for p in (run_dir / "cells").glob("*.json")]
    assert {
        (r["cell"]["framework"], r["cell"]["task"], r["cell"]["precision"], r["cell"]["tuning"]) for r in got
    } == EXPECTED
    assert {r["status"] for r in got} == {"ok"} and {r["system"]["executor"] for r in got} == {"system"}
    assert {r["system"]["gpu_ids"] for r in got} == {"0"}
    assert sorted(b["framework"] for b in json.loads((run_dir / "barriers.json").read_text())) == [
        "chainer",
        "jax",
        "keras-jax",
        "keras-torch",
        "pytorch",
    ]
    assert set(summary["parts"]) == {"1", "2"} and not any(p["not_started"] for p in summary["parts"].values())
    assert summary["not_run"] == [] and len(summary["statuses"]) == len(EXPECTED)
    assert json.loads((tmp_path / "data" / "synthetic" / "cifar10" / "manifest.json").read_text())["train"] == 640
    assert (run_dir / "results.md").exists()


def test_without_the_wheels_the_keras_cells_fail_saying_how_and_the_others_run(tmp_path, fake_gpu_machine, monkeypatch):
    monkeypatch.setattr(gpu_check, "install_wheels", lambda python, site: "no wheels in X: run `make gpu-wheels`")
    assert gpu_check.main(fake_gpu_machine) == 1
    run_dir, summary = the_run(tmp_path)
    got = {
        r["cell"]["framework"]: r
        for r in (records.read(p) for p in (run_dir / "cells").glob("*.json"))
        if r["cell"]["task"] == "cnn" and r["cell"]["precision"] == "amp"
    }
    assert {fw: r["status"] for fw, r in got.items()} == {
        "pytorch": "ok",
        "jax": "ok",
        "keras-jax": "failed",
        "keras-torch": "failed",
    }
    assert "make gpu-wheels" in got["keras-jax"]["reason"]
    tested = {b["framework"] for part in summary["parts"].values() for b in part["barrier_tests"]}
    assert tested == {"pytorch", "jax", "chainer"}  # not the Keras frameworks: no Keras to test


def test_a_leaking_barrier_fails_the_check(tmp_path, fake_gpu_machine, monkeypatch):
    monkeypatch.setenv("FAKE_BARRIER", "leak")
    assert gpu_check.main(fake_gpu_machine) == 1
    run_dir, summary = the_run(tmp_path)
    tests = [b for part in summary["parts"].values() for b in part["barrier_tests"]]
    assert tests and {b["status"] for b in tests} == {"failed"} and "returns early" in tests[0]["reason"]


def test_cells_past_the_budget_are_not_started_and_the_check_says_so(tmp_path, fake_gpu_machine, monkeypatch, capsys):
    monkeypatch.setenv("FAKE_BEHAVIOUR", "cnn=slow,gru=slow,resnet50=slow")
    monkeypatch.setenv("FAKE_SLOW_SECONDS", "1.5")
    monkeypatch.setattr(gpu_check, "MIN_CELL_SECONDS", 1.0)
    monkeypatch.setattr(gpu_check, "parts", lambda cells, estimates, budget_s: [list(cells)])  # one part of 6 s
    assert gpu_check.main([*fake_gpu_machine, "--budget-minutes", "0.1"]) == 1
    run_dir, summary = the_run(tmp_path)
    part = summary["parts"]["1"]
    assert part["not_started"] and len(part["statuses"]) + len(part["not_started"]) == len(EXPECTED)
    assert summary["not_run"] == part["not_started"]
    assert "the check is incomplete" in capsys.readouterr().out


def test_the_second_part_continues_the_first_parts_run_folder(tmp_path, fake_gpu_machine, capsys):
    assert gpu_check.main([*fake_gpu_machine, "--part", "1"]) == 0
    run_dir, summary = the_run(tmp_path)
    first = set(summary["statuses"])
    assert set(summary["parts"]) == {"1"} and summary["not_run"] and first
    assert "not run yet" in capsys.readouterr().out
    assert gpu_check.main([*fake_gpu_machine, "--part", "2"]) == 0
    (again,) = (tmp_path / "results").iterdir()
    _, summary = the_run(tmp_path)
    assert again == run_dir and set(summary["parts"]) == {"1", "2"} and summary["not_run"] == []
    assert first < set(summary["statuses"]) and len(summary["statuses"]) == len(EXPECTED)
    assert gpu_check.main([*fake_gpu_machine, "--part", "2", "--resume", "nope"]) == 2
    assert "not a run folder" in capsys.readouterr().err


def test_chainer_that_cannot_run_in_that_python_is_skipped_with_its_error(tmp_path, fake_gpu_machine, monkeypatch):
    """The probe runs for real in the fake machine's Python, which has no CuPy: Chainer's cell is skipped with the
    error, not failed, and the others run; without its source archive the cell fails, saying how."""
    monkeypatch.undo()  # the fixture's "Chainer runs" stand-ins, and the rest …
    monkeypatch.setenv("ROSETTA_GPU_IDS_AVAILABLE", "0")  # … set again but for the probe
    monkeypatch.setenv("PATH", f"{tmp_path / 'bin'}{os.pathsep}{os.environ['PATH']}")  # the fake nvidia-smi
    monkeypatch.setitem(datasets.FULL_SIZE, "cifar10", {"train": 640, "test": 128})
    monkeypatch.setitem(datasets.FULL_SIZE, "imdb", {"train": 640, "test": 128})
    monkeypatch.setattr(records, "OWN_RECORDS_ONLY", False)
    monkeypatch.setattr(gpu_check, "install_wheels", lambda python, site: None)
    monkeypatch.setattr(gpu_check, "install_sources", lambda site: None)
    monkeypatch.setattr(gpu_check, "parts", lambda cells, estimates, budget_s: [list(cells)])
    assert gpu_check.main(fake_gpu_machine) == 0
    run_dir, summary = the_run(tmp_path)
    record = records.read(run_dir / "cells" / "chainer-cnn-system-fp32-1gpu.json")
    assert record["status"] == "skipped" and "Chainer cannot run in this Python" in record["reason"]
    assert "cupy" in record["reason"]  # the error itself
    assert "chainer" not in {b["framework"] for b in summary["parts"]["1"]["barrier_tests"]}
    assert {s for cell, s in summary["statuses"].items() if not cell.startswith("chainer")} == {"ok"}
    monkeypatch.setattr(gpu_check, "install_sources", lambda site: "no chainer-7.8.1.tar.gz: run `make gpu-wheels`")
    assert gpu_check.main(fake_gpu_machine) == 1
    runs_made = sorted((tmp_path / "results").iterdir())
    record = records.read(runs_made[-1] / "cells" / "chainer-cnn-system-fp32-1gpu.json")
    assert record["status"] == "failed" and "make gpu-wheels" in record["reason"]


def test_without_a_gpu_the_check_says_where_it_runs(tmp_path, fake_gpu_machine, monkeypatch, capsys):
    monkeypatch.delenv("ROSETTA_GPU_IDS_AVAILABLE")
    monkeypatch.setenv("PATH", str(tmp_path))  # no nvidia-smi
    assert gpu_check.main(fake_gpu_machine) == 2
    assert "no GPU visible" in capsys.readouterr().err
    assert not (tmp_path / "results").exists()


def test_an_interpreter_that_is_not_there_is_named(tmp_path, capsys):
    assert runs.main(["--profile", "smoke", "--python", str(tmp_path / "nope"), "--results", str(tmp_path)]) == 2
    assert "no executable interpreter there" in capsys.readouterr().err


# ---------------------------------------------------------------- the barrier self-test and audit, fake devices


class FakeDevice:
    """A device that runs queued work on a thread: `matmul` queues JOB seconds of it; the honest barrier and the
    device synchronize wait until it is done, a leaking barrier returns at once, a blind synchronize too."""

    JOB = 0.01

    def __init__(self, barrier_waits=True, sync_sees=True):
        self.work = queue.Queue()
        self.barrier_waits, self.sync_sees = barrier_waits, sync_sees
        threading.Thread(target=self.run, daemon=True).start()

    def run(self):
        while True:
            self.work.get()
            time.sleep(self.JOB)
            self.work.task_done()

    def gemm(self, cfg, n, dtype):
        return (lambda: self.work.put(n)), (self.work.join if self.barrier_waits else lambda: None)

    def sync(self):
        start = time.perf_counter()
        if self.sync_sees:
            self.work.join()
        return time.perf_counter() - start


@pytest.mark.parametrize(
    "device, status, says",
    [
        (dict(), "ok", None),
        (dict(barrier_waits=False), "failed", "returns before the queued work ends"),
        (dict(sync_sees=False), "failed", "does not see this framework's streams"),
    ],
)
def test_the_barrier_self_test_tells_a_waiting_barrier_from_a_leaking_one(monkeypatch, device, status, says):
    fake = FakeDevice(**device)
    monkeypatch.setattr(barrier_check, "PRODUCTS", 10)
    monkeypatch.setattr(barrier_check, "device_sync", lambda: fake.sync)
    result = barrier_check.check("pytorch", fake)
    assert result["status"] == status, result
    assert says is None or says in result["reason"]


def test_the_barrier_self_test_skips_on_the_cpu_with_its_reason():
    result = barrier_check.check("pytorch", FakeDevice(), device="cpu")
    assert result["status"] == "skipped" and "CPU" in result["reason"]


def test_the_clock_audits_its_barrier_on_a_gpu(monkeypatch):
    monkeypatch.setattr(timing, "_audit", [])
    assert timing.summarize([1.0])["barrier_audit"] is None  # no CUDA context: nothing audited
    leftover = iter([1e-5, 0.05])
    monkeypatch.setattr(timing, "device_sync", lambda: lambda: next(leftover))
    for _ in range(2):
        with timing.stopwatch():
            time.sleep(0.01)
    audit = timing.summarize([1.0])["barrier_audit"]
    assert audit["checks"] == 2 and audit["leaks"] == 1 and audit["max_after_seconds"] == 0.05


# ---------------------------------------------------------------- what the bare machine's Python lacks


def test_without_jsonschema_records_are_refused_unless_the_check_reads_its_own(tmp_path, monkeypatch):
    from shared.record import make_record, write_record

    record = make_record(
        {
            "framework": "pytorch",
            "task": "cnn",
            "variant": "system",
            "precision": "fp32",
            "gpus": 1,
            "device": "gpu",
            "data": "synthetic",
            "scale": "full",
        },
        "ok",
        run_id="r",
    )
    write_record(tmp_path / "r.json", record)
    monkeypatch.setattr(records, "VALIDATOR", None)
    with pytest.raises(records.RecordError, match="jsonschema is not installed"):
        records.read(tmp_path / "r.json")
    monkeypatch.setattr(records, "OWN_RECORDS_ONLY", True)
    assert records.read(tmp_path / "r.json")["status"] == "ok"


def test_full_size_twins_are_made_again_when_their_size_differs(tmp_path, monkeypatch):
    monkeypatch.setitem(datasets.FULL_SIZE, "imdb", {"train": 300, "test": 100})
    datasets.prepare(tmp_path, synthetic=True, datasets=("imdb",), full_size=True)
    manifest = lambda: json.loads((tmp_path / "imdb" / "manifest.json").read_text())
    assert (manifest()["train"], manifest()["test"]) == (300, 100)
    datasets.prepare(tmp_path, synthetic=True, datasets=("imdb",))  # any twin will do: kept
    assert manifest()["train"] == 300
    monkeypatch.setitem(datasets.FULL_SIZE, "imdb", {"train": 200, "test": 100})
    datasets.prepare(tmp_path, synthetic=True, datasets=("imdb",), full_size=True)
    assert manifest()["train"] == 200


def test_keras_comes_from_hashed_wheels_installed_offline_or_its_cells_say_how(tmp_path):
    """The GPU machine's Python lacks Keras; gpu-check installs the travelling wheels with pip --no-index
    --require-hashes. Here: a tiny wheel written on the spot, its hash pinned, installed into a site folder and imported
    from there; a wrong hash and a missing wheelhouse are refused with words that say what to do."""
    wheels = tmp_path / "wheels"
    wheels.mkdir()
    wheel = wheels / "rosetta_probe-1.0-py3-none-any.whl"
    with zipfile.ZipFile(wheel, "w") as z:
        files = {
            "rosetta_probe/__init__.py": "VALUE = 42\n",
            "rosetta_probe-1.0.dist-info/METADATA": "Metadata-Version: 2.1\nName: rosetta-probe\nVersion: 1.0\n",
            "rosetta_probe-1.0.dist-info/WHEEL": "Wheel-Version: 1.0\nGenerator: hand\nRoot-Is-Purelib: true\n"
            "Tag: py3-none-any\n",
        }
        files["rosetta_probe-1.0.dist-info/RECORD"] = (
            "".join(f"{name},,\n" for name in files) + "rosetta_probe-1.0.dist-info/RECORD,,\n"
        )
        for name, text in files.items():
            z.writestr(name, text)
    digest = hashlib.sha256(wheel.read_bytes()).hexdigest()
    requirements = tmp_path / "requirements.txt"
    requirements.write_text(f"rosetta-probe==1.0 --hash=sha256:{digest}\n")
    site = tmp_path / "site"
    assert gpu_check.install_wheels(sys.executable, site, wheels, requirements) is None
    probe = subprocess.run(
        [sys.executable, "-c", "import rosetta_probe; print(rosetta_probe.VALUE)"],
        env={**os.environ, "PYTHONPATH": str(site)},
        capture_output=True,
        text=True,
    )
    assert probe.stdout.strip() == "42", probe.stderr
    requirements.write_text(f"rosetta-probe==1.0 --hash=sha256:{'0' * 64}\n")
    assert "pip could not install" in gpu_check.install_wheels(sys.executable, tmp_path / "other", wheels, requirements)
    assert "make gpu-wheels" in gpu_check.install_wheels(sys.executable, site, tmp_path / "none", requirements)
    pinned = (ROOT / "docker" / "gpu-check" / "requirements.txt").read_text()
    assert all(f"{name}==" in pinned for name in ("keras", "namex", "optree")) and pinned.count("--hash=sha256:") == 3


def test_chainer_comes_from_its_hashed_source_unpacked_without_a_build(tmp_path):
    """Chainer 7.8.1 exists only as a source archive: gpu-check checks its hash, then unpacks only its top-level Python
    packages (no setup.py run, no network) as plain files; a wrong hash and a missing archive are refused in words."""
    import io
    import tarfile

    wheels = tmp_path / "wheels"
    wheels.mkdir()
    archive = wheels / "probe-1.0.tar.gz"
    with tarfile.open(archive, "w:gz") as tar:

        def add(name, text):
            data = text.encode()
            info = tarfile.TarInfo(name)
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))

        add("probe-1.0/setup.py", "raise SystemExit('never run')\n")
        add("probe-1.0/probe/__init__.py", "from probe.sub import VALUE\n")
        add("probe-1.0/probe/sub/__init__.py", "VALUE = 42\n")
        add("probe-1.0/docs/conf.py", "x = 1\n")  # not a package: not unpacked
        link = tarfile.TarInfo("probe-1.0/probe/escape")
        link.type, link.linkname = tarfile.SYMTYPE, "/etc/passwd"  # the data filter refuses it
        tar.addfile(link)
    sources = tmp_path / "sources.txt"
    sources.write_text(
        f"# a comment\nprobe==1.0 \\\n    --hash=sha256:{hashlib.sha256(archive.read_bytes()).hexdigest()}\n"
    )
    site = tmp_path / "site"
    assert "refused" in gpu_check.install_sources(site, wheels, sources)
    with tarfile.open(archive) as tar:  # the same archive without the link
        members = [(m, tar.extractfile(m).read()) for m in tar.getmembers() if m.isfile()]
    with tarfile.open(archive, "w:gz") as tar:
        for member, data in members:
            tar.addfile(member, io.BytesIO(data))
    sources.write_text(f"probe==1.0 --hash=sha256:{hashlib.sha256(archive.read_bytes()).hexdigest()}\n")
    assert gpu_check.install_sources(site, wheels, sources) is None
    assert sorted(p.name for p in site.iterdir()) == ["probe"]
    probe = subprocess.run(
        [sys.executable, "-c", "import probe; print(probe.VALUE)"],
        env={**os.environ, "PYTHONPATH": str(site)},
        capture_output=True,
        text=True,
    )
    assert probe.stdout.strip() == "42", probe.stderr
    sources.write_text(f"probe==1.0 --hash=sha256:{'0' * 64}\n")
    assert "refused" in gpu_check.install_sources(tmp_path / "other", wheels, sources)
    assert "make gpu-wheels" in gpu_check.install_sources(site, tmp_path / "none", sources)
    assert [(n, v) for n, v, _ in gpu_check.pinned_sources()] == [("chainer", "7.8.1")]
