"""Community submissions: a real run folder (the fake runners through scripts.run.execute) is submitted and accepted;
tampered copies are each rejected with their reason, one check at a time where one edit can isolate it (the digests
and counts are re-made after the edit, so only the check under test can object); --no-hosts leaves no host name."""

import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml
from conftest import ROOT, scale_clocks

from scripts import reproduce
from scripts.launch.executors import LocalExecutor, RunSettings
from scripts.plan import planfile as plans
from scripts.plan.matrix import Cell, load
from scripts.results import submission, verify
from scripts.run import execute
from shared import params, sysinfo, timing

pytestmark = pytest.mark.unit

RUN_ID = "smoke-20261204-101500"
TEST_HOST = "rosetta-test-host-7"
NAME = "test-submission"
WORKFLOW = ROOT / ".github" / "workflows" / "submissions.yml"
GIT_ID = ["-c", "user.name=rosetta-test", "-c", "user.email=test@rosetta.invalid", "-c", "commit.gpgsign=false"]


def git(repo, *args):
    return subprocess.run(["git", *GIT_ID, *args], cwd=repo, check=True, capture_output=True, text=True).stdout.strip()


@pytest.fixture(scope="module")
def repo(tmp_path_factory):
    """A repository of its own whose HEAD is the working tree as it is now, edits and untracked files included (so
    these tests run on uncommitted code too), on top of one earlier commit (HEAD~1, for --ancestor-of)."""
    repo = tmp_path_factory.mktemp("repo")
    files = (
        subprocess.run(
            ["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"],
            cwd=ROOT,
            check=True,
            capture_output=True,
        )
        .stdout.decode()
        .split("\0")
    )
    git(repo, "init", "-q", "-b", "main")
    git(repo, "commit", "-q", "--allow-empty", "-m", "before")
    for rel in files:
        source = ROOT / rel
        if rel and not rel.startswith(("results/", "tests/")) and source.is_file() and not source.is_symlink():
            (repo / rel).parent.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(source, repo / rel)
    git(repo, "add", "-A")
    git(repo, "commit", "-q", "-m", "the working tree")
    return repo


@pytest.fixture(scope="module", autouse=True)
def trusted_repo(repo):
    """The checker trusts the test's repository (its history, its allowed_signers), not the developer's checkout."""
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(submission.spec, "REPO", repo)
        yield repo


@pytest.fixture(scope="module")
def head(repo):
    return git(repo, "rev-parse", "HEAD")


@pytest.fixture(scope="module")
def run_folder(tmp_path_factory, synthetic_data, head):
    """The smoke profile's cells (PyTorch, all four tasks) run by the fake runners at the test repository's commit:
    the GRU cell crashes (a failed record the host writes), the ResNet-50 cell is skipped by the pre-flight, CNN and
    DenseNet are ok with their samples; one log names the host."""
    plan_file = plans.make(load(), "smoke", RUN_ID)
    run_dir = tmp_path_factory.mktemp("run") / RUN_ID
    plans.write(run_dir / "plan.json", plan_file)
    skipped = next(c.id for c in plan_file.cells if c.cell.task == "resnet50")
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("FAKE_BEHAVIOUR", "gru=crash")
        mp.setenv("ROSETTA_HOST", TEST_HOST)
        mp.setenv("ROSETTA_GIT_COMMIT", head[:12])
        executor = LocalExecutor({"pytorch": sys.executable}, root=ROOT / "tests" / "fake")
        execute(
            plan_file.plan,
            executor,
            run_dir,
            RunSettings(RUN_ID, 1, 60.0, synthetic_data.parent),
            unfit={skipped: "no kernels for this host's GPUs (a test)"},
        )
    first_log = sorted((run_dir / "logs").glob("*.log"))[0]
    first_log.write_text(first_log.read_text() + f"launched on {TEST_HOST} by the test\n")
    return run_dir


@pytest.fixture(scope="module")
def submitted(run_folder, tmp_path_factory):
    return submission.submit(run_folder, NAME, community=tmp_path_factory.mktemp("community"))


def records_of(folder):
    return {p.name: json.loads(p.read_text()) for p in sorted((folder / "cells").glob("*.json"))}


def by(folder, status, task=None):
    """The file name of the first record of `status` (and `task`)."""
    return next(
        name for name, r in records_of(folder).items() if r["status"] == status and task in (None, r["cell"]["task"])
    )


def edit_json(path, change):
    doc = json.loads(path.read_text())
    change(doc)
    path.write_text(json.dumps(doc, indent=2, sort_keys=True) + "\n")


def reseal(folder, change_manifest=None):
    """Re-make the manifest's counts (and `change_manifest`'s edit) and the digests after a test's edit, as a
    careful forger would: only the check under test is left to object."""
    manifest = json.loads((folder / submission.MANIFEST).read_text())
    manifest["cells"] = submission.statuses(submission.check_records(folder)[0])  # of the records that validate
    if change_manifest:
        change_manifest(manifest)
    submission.seal(folder, manifest)


@pytest.fixture
def copy(submitted, tmp_path):
    return Path(shutil.copytree(submitted, tmp_path / NAME))


# ---------------------------------------------------------------- accepted


def test_a_real_run_is_submitted_and_accepted(submitted, run_folder, head, capsys):
    plan_ids = {c["id"] for c in json.loads((run_folder / "plan.json").read_text())["cells"]}
    logs = {f"logs/{p.name}" for p in (run_folder / "logs").iterdir()}  # a cell the pre-flight skipped has none
    assert set(submission.contents(submitted)) == {
        "submission.json",
        "digests.sha256",
        "plan.json",
        *(f"cells/{i}.json" for i in plan_ids),
        *logs,
    }
    for rel in ("plan.json", *(f"cells/{i}.json" for i in plan_ids)):  # without --no-hosts: byte for byte
        assert (submitted / rel).read_bytes() == (run_folder / rel).read_bytes()
    assert submission.findings(submitted) == []
    manifest = json.loads((submitted / "submission.json").read_text())
    assert manifest["cells"] == {"ok": len(plan_ids) - 2, "failed": 1, "skipped": 1, "timeout": 0}
    assert manifest["git_commit"] == head and not manifest["hosts_removed"]
    assert manifest["code_hash"] == submission.committed_code_hash(manifest["git_commit"])
    machine = manifest["machine"]
    assert machine["machine_classes"] and machine["cpu"] and machine["cpu_count"]
    assert machine["stacks"]["pytorch:cpu"]["framework_version"] == "fake"
    # the digests are sha256sum's own format
    assert subprocess.run(["sha256sum", "--check", "--quiet", "digests.sha256"], cwd=submitted).returncode == 0
    assert submission.main(["check", str(submitted)]) == 0
    assert capsys.readouterr().out.splitlines()[-1] == "1 submission(s) checked: 1 accepted, 0 rejected"
    [(name, folder, summary)] = submission.accepted(submitted.parent)
    assert (name, folder) == (NAME, submitted)
    assert summary["cells"] == manifest["cells"] and summary["machine"] == machine
    assert len(summary["records"]) == len(plan_ids) and len(summary["logs"]) == len(logs)


def test_no_hosts_leaves_no_host_name_in_any_file(run_folder, tmp_path):
    folder = submission.submit(run_folder, no_hosts=True, community=tmp_path)
    assert re.fullmatch(r"cpu-.+-\d{8}", folder.name)  # MACHINECLASS-DATE
    assert submission.findings(folder) == []
    assert json.loads((folder / "submission.json").read_text())["hosts_removed"]
    assert {r["system"]["host"] for r in records_of(folder).values()} == {submission.HOST_PLACEHOLDER}
    names = [n for n in submission.host_names(records_of(run_folder)) if n != submission.HOST_PLACEHOLDER]
    assert TEST_HOST in names
    pattern = re.compile(r"(?<![A-Za-z0-9_-])(?:" + "|".join(map(re.escape, names)) + r")(?![A-Za-z0-9_-])", re.I)
    for rel in submission.contents(folder):
        assert not pattern.search((folder / rel).read_text()), rel
    assert "launched on host-removed by the test" in "".join(p.read_text() for p in (folder / "logs").iterdir())


def test_a_checkout_whose_runner_code_is_not_the_commit_is_refused(run_folder, tmp_path, monkeypatch):
    monkeypatch.setattr(submission.package, "checkout_code_hash", lambda repo=ROOT: "0" * 16)
    with pytest.raises(submission.SubmissionError, match="uncommitted or later changes"):
        submission.submit(run_folder, community=tmp_path)
    assert list(tmp_path.iterdir()) == []  # nothing left behind, staging included


def test_the_command_line_submits_or_says_why_not(run_folder, tmp_path, monkeypatch, capsys):
    monkeypatch.setattr(submission.spec, "COMMUNITY", tmp_path / "community")
    assert submission.main(["submit", str(run_folder), "--name", "cli", "--no-hosts"]) == 0
    assert "accepted by the checker" in capsys.readouterr().out
    assert submission.main(["check"]) == 0  # no folder: every submission under COMMUNITY
    assert capsys.readouterr().out.splitlines()[-1] == "1 submission(s) checked: 1 accepted, 0 rejected"
    assert submission.main(["submit", str(tmp_path)]) == 2
    assert "is not a run folder (it needs plan.json and cells/)" in capsys.readouterr().err


def test_an_existing_name_or_an_unsafe_one_is_refused(run_folder, submitted):
    with pytest.raises(submission.SubmissionError, match="exists"):
        submission.submit(run_folder, NAME, community=submitted.parent)
    with pytest.raises(submission.SubmissionError, match="--name"):
        submission.submit(run_folder, "../escape", community=submitted.parent)


# ---------------------------------------------------------------- rejected, each with its reason


def edited_value(folder):
    edit_json(folder / "cells" / by(folder, "ok", "cnn"), lambda r: r["metrics"].update(accuracy=0.95))
    return [f"cells/{by(folder, 'ok', 'cnn')}: edited after submit"]


def removed_log(folder):
    log = sorted((folder / "logs").iterdir())[0]
    log.unlink()
    return [f"logs/{log.name}: listed in digests.sha256 but missing: removed after submit"]


def added_log(folder):
    (folder / "logs" / "extra.log").write_text("a better number\n")
    return ["logs/extra.log: not in digests.sha256: added after submit"]


def removed_record(folder):
    name = by(folder, "failed")
    (folder / "cells" / name).unlink()
    reseal(folder)
    return [f"cells/{name}: missing: the plan holds this cell"]


def schema_breach(folder):
    name = by(folder, "ok", "cnn")
    edit_json(folder / "cells" / name, lambda r: r["cell"].update(precision="fp64"))
    reseal(folder)
    return [f"cells/{name}: fails validation: cell/precision"]


def no_samples(folder):
    name = by(folder, "ok", "densenet121")
    edit_json(folder / "cells" / name, lambda r: (timed_by_its_epoch(r), r["timing"].update(repeats=5)))
    reseal(folder)  # not a cell too short for a window (it says it timed five): its samples are missing
    return [f"cells/{name}: status ok without samples"]


def timed_by_its_epoch(record):
    """The record as a demo training cell too short for one timing window writes it: no samples (timing.repeats 0),
    its one epoch the time, every figure recomputed from that epoch as the runners do (shared.timing)."""
    metrics = record["metrics"]
    steps = metrics["train_samples"] // metrics["global_batch"]
    before = metrics["steady_samples_per_second"]
    metrics.update(
        timing.train_metrics([1.5], steps * metrics["global_batch"], warmup=metrics["warmup_seconds"], steps=steps)
    )
    metrics["train_minutes"] = metrics["train_seconds"] / 60
    for key in ("achieved_flops", "efficiency", "efficiency_of_gemm"):
        if metrics.get(key) is not None:
            metrics[key] *= metrics["steady_samples_per_second"] / before
    record["timing"].update(
        values=[], repeats=0, warmup_windows=[], median=None, min=None, max=None, q1=None, q3=None, spread=None
    )


def short_training_at_full_scale(folder):
    name = by(folder, "ok", "densenet121")
    edit_json(
        folder / "cells" / name,
        lambda r: (
            timed_by_its_epoch(r),
            r["cell"].update(scale="full"),
            r["system"].update(params_hash=params.params_hash("densenet121", "full")),
        ),
    )
    reseal(folder)
    return [f"cells/{name}: status ok without samples", ...]  # … and a demo's FLOPs a sample under full's hash


def test_a_demo_training_cell_too_short_for_a_window_is_timed_by_its_epoch(copy):
    """A demo DenseNet's two steps fill no timing window: its record says so (repeats 0) and it is accepted, as verify
    takes it (one value); at full scale the same record is rejected (short_training_at_full_scale)."""
    edit_json(copy / "cells" / by(copy, "ok", "densenet121"), timed_by_its_epoch)
    reseal(copy)
    assert submission.findings(copy) == []


def forged_median(folder):
    name = by(folder, "ok", "cnn")
    edit_json(folder / "cells" / name, lambda r: r["timing"].update(median=1.0))
    reseal(folder)
    return [f"cells/{name}: timing.median 1 is not the median of timing.values"]


def failed_as_ok(folder):
    name = by(folder, "failed")
    edit_json(folder / "cells" / name, lambda r: r.update(status="ok"))
    reseal(folder)
    record = json.loads((folder / "cells" / name).read_text())
    return [
        f"cells/{name}: status ok but it gives a failure reason",
        f"cells/{name}: status ok without its time metric",
        f"cells/{name}: status ok without a system description",
        f"cells/{name}: status ok without samples",
        *submission.lacking(f"cells/{name}", record),  # each input its figures would be checked from
        f"cells/{name}: states too little of its hardware to bound its rates",
    ]


def skip_without_reason(folder):
    name = by(folder, "skipped")
    edit_json(folder / "cells" / name, lambda r: r.update(reason=None))
    reseal(folder)
    return [f"cells/{name}: status skipped without a reason"]


def unknown_code_hash(folder):
    reseal(folder, lambda m: m.update(code_hash="0123456789abcdef"))
    return ["submission.json: code_hash 0123456789abcdef is not the hash of runners/ and shared/ at commit"]


def unknown_commit(folder):
    reseal(folder, lambda m: m.update(git_commit="f" * 40))
    return [f"submission.json: git_commit {'f' * 40} is not a commit of this repository"]


def missing_machine_field(folder):
    reseal(folder, lambda m: m["machine"].pop("cpu"))
    return [
        "submission.json: machine.cpu is missing (the machine description must be complete)",
        "submission.json: machine.cpu is None, the records say",
    ]


def miscounted(folder):
    reseal(folder, lambda m: m["cells"].update(failed=0))
    return ["submission.json: cells {'failed': 0, 'ok': "]


def zero_time(folder):
    name = by(folder, "ok", "cnn")
    edit_json(folder / "cells" / name, lambda r: r["metrics"].update(train_seconds=0))
    reseal(folder)
    return [
        f"cells/{name}: status ok without its time metric metrics.train_seconds",
        f"cells/{name}: metrics.train_seconds 0 is not the sum of metrics.epoch_seconds",
        f"cells/{name}: metrics.samples_per_second × train_seconds (0 samples) is not",
    ]


def nan_sample(folder):
    name = by(folder, "ok", "cnn")
    edit_json(folder / "cells" / name, lambda r: r["timing"]["values"].__setitem__(0, float("nan")))
    reseal(folder)
    # every reader refuses it (records.contradictions), before the submission checker's own words
    return [f"cells/{name}: fails validation: inconsistent: timing/values/0 is not a finite number"]


def nan_accuracy(folder):
    name = by(folder, "ok", "cnn")
    edit_json(folder / "cells" / name, lambda r: r["metrics"].update(accuracy=float("nan")))
    reseal(folder)
    return [f"cells/{name}: fails validation: inconsistent: metrics/accuracy is not a finite number"]


def accuracy_above_one(folder):
    name = by(folder, "ok", "cnn")
    edit_json(folder / "cells" / name, lambda r: r["metrics"].update(accuracy=1.5))
    reseal(folder)
    return [f"cells/{name}: fails validation: inconsistent: metrics/accuracy 1.5 is not within [0, 1]"]


def other_run_id(folder):
    name = by(folder, "ok", "cnn")
    edit_json(folder / "cells" / name, lambda r: r.update(run_id="smoke-20990101-000000"))
    reseal(folder)
    return [f"cells/{name}: run id 'smoke-20990101-000000' is not the plan's"]


def other_commit(folder):
    name = by(folder, "ok", "cnn")
    edit_json(folder / "cells" / name, lambda r: r.update(git_commit="abcdef123456"))
    reseal(folder)
    return [f"cells/{name}: ran at commit abcdef123456, not the submission's"]


def copied_samples(folder):
    """The skipped cell turned ok with the CNN cell's numbers (its reason dropped, its system copied)."""
    source, target = by(folder, "ok", "cnn"), by(folder, "skipped")
    donor = json.loads((folder / "cells" / source).read_text())
    edit_json(
        folder / "cells" / target,
        lambda r: r.update(
            status="ok",
            reason=None,
            metrics=donor["metrics"],
            timing=donor["timing"],
            system={**donor["system"], "params_hash": params.params_hash(r["cell"]["task"], r["cell"]["scale"])},
        ),
    )
    reseal(folder)
    return [f"cells/{target}: its samples are those of cells/{source}, to the last digit: copied numbers", ...]
    # … and what a CNN's figures lack as a ResNet-50's (images, its unit, its batch): findings of their own


def invented_cell(folder):
    """A bf16 twin of the CNN cell, added to the plan and to cells/ (the record as the runner would write it)."""
    name = by(folder, "ok", "cnn")
    record = json.loads((folder / "cells" / name).read_text())
    record["cell"]["precision"] = "bf16"
    record = scale_clocks(record, 0.9)
    new_id = Cell(**record["cell"]).id
    (folder / "cells" / f"{new_id}.json").write_text(json.dumps(record))
    edit_json(
        folder / "plan.json",
        lambda p: p["cells"].append(
            {**next(c for c in p["cells"] if c["id"] == name[:-5]), "id": new_id, "precision": "bf16"}
        ),
    )
    reseal(folder)
    return [f"plan.json: cell {new_id} is not in profile smoke's plan at commit"]


def removed_skipped_cell(folder):
    name = by(folder, "skipped")
    (folder / "cells" / name).unlink()
    edit_json(folder / "plan.json", lambda p: p.update(cells=[c for c in p["cells"] if c["id"] != name[:-5]]))
    reseal(folder)
    return [f"plan.json: cell {name[:-5]} of profile smoke's plan at commit"]


def negative_sample(folder):
    name = by(folder, "ok", "cnn")
    edit_json(folder / "cells" / name, lambda r: r["timing"]["values"].__setitem__(0, -1.0))
    reseal(folder)
    return [f"cells/{name}: fails validation: inconsistent: timing/values holds a time of 0 or less"]


def rate_above_the_hardware(folder):
    name = by(folder, "ok", "cnn")
    edit_json(
        folder / "cells" / name,
        lambda r: (r["system"].update(calibration={"gemm_fp32_flops": 1e18}), r["metrics"].pop("efficiency_of_gemm")),
    )  # its share: no figure
    reseal(folder)
    return [f"cells/{name}: system.calibration.gemm_fp32_flops 1e+09 GFLOP/s is above what the stated hardware can do"]


def calibration_below_the_hardware(folder):
    """Every ok record's GEMM at 1 MFLOP/s (the floor takes the run's best share)."""
    name = by(folder, "ok", "cnn")
    for other in (n for n, r in records_of(folder).items() if r["status"] == "ok"):
        edit_json(
            folder / "cells" / other,
            lambda r: (
                r["system"].update(calibration={"gemm_fp32_flops": 1e6}),
                r["metrics"].pop("efficiency_of_gemm"),
            ),
        )
    reseal(folder)
    return [f"cells/{name}: the run's best CPU GEMM (0.001 GFLOP/s)"]


@pytest.mark.parametrize(
    "tamper",
    [
        edited_value,
        removed_log,
        added_log,
        removed_record,
        schema_breach,
        no_samples,
        short_training_at_full_scale,
        forged_median,
        failed_as_ok,
        skip_without_reason,
        unknown_code_hash,
        unknown_commit,
        missing_machine_field,
        miscounted,
        zero_time,
        nan_sample,
        nan_accuracy,
        accuracy_above_one,
        other_run_id,
        other_commit,
        copied_samples,
        invented_cell,
        removed_skipped_cell,
        negative_sample,
        rate_above_the_hardware,
        calibration_below_the_hardware,
    ],
)
def test_a_tampered_copy_is_rejected_with_its_reason(copy, tamper, capsys):
    expected = tamper(copy)
    exact = expected[-1] is not ...  # a tamper that ends its list in … may cause more findings
    expected = [f"{NAME}/{line}" for line in expected if line is not ...]
    found = submission.findings(copy)
    assert len(found) == len(expected) if exact else len(found) > len(expected), "\n".join(found)
    for i, want in enumerate(expected):
        assert (found[i] if exact else next((g for g in found if g.startswith(want)), "")).startswith(want), "\n".join(
            found
        )
    assert submission.accepted(copy.parent) == []
    assert submission.main(["check", str(copy)]) == 1
    out = capsys.readouterr().out.splitlines()
    assert out[0].startswith("What this check proves: the digests prove only that the files are those listed")
    assert out[1 : len(found) + 1] == [f"ERROR {line}" for line in found]
    assert out[-2:] == [
        f"submission {NAME}: REJECTED, {len(found)} finding(s)",
        "1 submission(s) checked: 0 accepted, 1 rejected",
    ]


def test_a_commit_off_the_named_branch_is_rejected(submitted):
    """CI's --ancestor-of: the submission's commit must be on the base branch (HEAD~1 is an ancestor of nothing
    newer than itself, so HEAD is not on it)."""
    assert submission.findings(submitted, ancestor_of="HEAD") == []
    [finding] = submission.findings(submitted, ancestor_of="HEAD~1")
    assert finding.endswith("is not on HEAD~1")


def test_a_folder_of_garbage_is_rejected_not_crashed_on(tmp_path):
    folder = tmp_path / "junk"
    (folder / "cells").mkdir(parents=True)
    (folder / "cells" / "x.json").write_text("{not json")
    (folder / "submission.json").write_text("[]")
    found = submission.findings(folder)
    assert any("digests.sha256: missing" in line for line in found)
    assert any("cells/x.json: fails validation" in line for line in found)
    assert any("submission.json: (the file): [] is not of type 'object'" in line for line in found)
    assert any("plan.json:" in line for line in found)


# ---------------------------------------------------------------- CI and make


def test_the_workflow_checks_every_pull_request_with_the_base_branchs_checker():
    """The pull request's files are data under pr/ (sparse), the working tree and its scripts/ are the base's."""
    doc = yaml.safe_load(WORKFLOW.read_text())
    on = doc.pop(True, doc.get("on"))
    assert on["pull_request"]["paths"] == ["results/community/**"]
    assert doc["permissions"] == {"contents": "read"}
    job = doc["jobs"]["check"]
    assert job["runs-on"] == "ubuntu-24.04"
    steps = job["steps"]
    base, pr = (step for step in steps if step.get("uses", "").startswith("actions/checkout@"))
    assert base["with"]["ref"] == "${{ github.event.pull_request.base.sha }}" and "path" not in base["with"]
    assert base["with"]["fetch-depth"] == 0 and base["with"]["persist-credentials"] is False
    assert pr["with"]["ref"] == "${{ github.event.pull_request.head.sha }}" and pr["with"]["path"] == "pr"
    assert pr["with"]["sparse-checkout"] == "results/community" and pr["with"]["persist-credentials"] is False
    runs = [step.get("run", "") for step in steps[steps.index(pr) + 1 :]]
    check = next(run for run in runs if "-m scripts.results.submission check" in run)
    assert check.startswith(".venv/host/bin/python ") and "--community pr/results/community" in check
    assert "--ancestor-of HEAD" in check
    assert not any("pr/" in run.replace("pr/results/community", "") for run in runs)  # nothing of pr/ runs


def test_check_community_reads_another_folder(submitted, capsys):
    assert submission.main(["check", "--community", str(submitted.parent)]) == 0
    assert capsys.readouterr().out.splitlines()[-1] == "1 submission(s) checked: 1 accepted, 0 rejected"


def test_make_submit_calls_the_script():
    """`make submit RUN=…` resolves the run folder (or `latest`) through scripts.results.runs, then submits it."""
    import subprocess

    dry = subprocess.run(
        ["make", "-n", "submit", "RUN=results/demo-x", "NAME=mine", "NO_HOSTS=1"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    assert "-m scripts.results.runs results/demo-x" in dry
    assert re.search(r"-m scripts\.results\.submission submit \$run[\s\\]+--name mine --no-hosts", dry), dry


# ---------------------------------------------------------------- the committed example, tampered as a forger would

EXAMPLE = ROOT / "results" / "community" / "example-cpu-amd-epyc-zen4-2c-20261205"


@pytest.fixture
def example(tmp_path):
    """A copy of the committed community example, checked against this checkout's history (its commit is on main)."""
    manifest = json.loads((EXAMPLE / "submission.json").read_text())
    if submission.full_commit(manifest["git_commit"], ROOT) is None:
        pytest.skip(f"commit {manifest['git_commit'][:12]} is not in this clone (shallow?): git fetch --unshallow")
    folder = Path(shutil.copytree(EXAMPLE, tmp_path / EXAMPLE.name))
    assert submission.findings(folder, repo=ROOT) == []
    return folder


def test_halved_times_resealed_are_refused_by_the_figures_they_no_longer_explain(example):
    name = "jax-cnn-cpu-fp32-1cpu.json"
    edit_json(
        example / "cells" / name,
        lambda r: r["timing"].update(
            values=[v / 2 for v in r["timing"]["values"]], **{k: r["timing"][k] / 2 for k in ("median", "min", "max")}
        ),
    )
    reseal(example)
    [finding] = submission.findings(example, repo=ROOT)
    # refused on reading (records.contradictions), as every reader refuses it: the steady state is the median window
    # × the steps, and the windows were halved under it
    assert (
        finding.startswith(f"{EXAMPLE.name}/cells/{name}: fails validation: inconsistent: metrics/steady_state_seconds")
        and "does not follow from the samples" in finding
    )


def xeon(system):
    system.update(cpu="Intel Xeon Platinum 8480+", cpu_count=56, cpu_usable=56, cpu_physical_cores=56)


def test_a_machine_written_over_is_refused_by_its_own_class_and_its_calibration(example):
    for path in (example / "cells").glob("*.json"):
        edit_json(path, lambda r: xeon(r["system"]) if r["system"].get("machine_class") else None)
    reseal(example, lambda m: m.update(machine=submission.machine_of(submission.check_records(example)[0])[0]))
    found = submission.findings(example, repo=ROOT)
    classes = [
        line
        for line in found
        if "disagrees with the record's own facts, which give "
        "cpu:intel-xeon-platinum-8480:f25-m17-s1:avx512-bf16:56c" in line
    ]
    assert len(classes) >= 40, "\n".join(found)  # the records that describe the machine
    # a careful forger re-derives the class too: the calibration, measured on two cores, still tells
    for path in (example / "cells").glob("*.json"):
        edit_json(
            path,
            lambda r: (
                r["system"].update(machine_class=sysinfo.machine_class(r["system"], "cpu"))
                if r["system"].get("machine_class")
                else None
            ),
        )
    reseal(example, lambda m: m.update(machine=submission.machine_of(submission.check_records(example)[0])[0]))
    [finding] = submission.findings(example, repo=ROOT)
    assert "the run's best CPU GEMM" in finding and "the machine is not the one the records describe" in finding


def test_a_class_its_own_facts_do_not_give_is_refused(copy):
    """The same on a submission the tests make themselves (the example's test needs its commit in the history): a
    record whose CPU is written over keeps a class its facts no longer give, and is refused for it."""
    name = by(copy, "ok")
    edit_json(copy / "cells" / name, lambda r: xeon(r["system"]))
    reseal(copy)
    found = submission.findings(copy)
    assert any(name in line and "disagrees with the record's own facts" in line for line in found), found


def test_a_rate_above_the_stated_hardware_is_refused(example):
    name = "jax-cnn-cpu-fp32-1cpu.json"
    edit_json(example / "cells" / name, lambda r: r["system"]["calibration"].update(gemm_fp32_flops=1e15))
    edit_json(
        example / "cells" / name,
        lambda r: r["metrics"].update(efficiency_of_gemm=r["metrics"]["achieved_flops"] / 1e15),
    )  # a careful forger keeps the figures in step
    reseal(example)
    [finding] = submission.findings(example, repo=ROOT)
    assert finding.startswith(
        f"{EXAMPLE.name}/cells/{name}: system.calibration.gemm_fp32_flops 1e+06 GFLOP/s is "
        "above what the stated hardware can do (640 GFLOP/s at most)"
    )


def test_the_example_is_accepted_and_says_what_it_proves(capsys, example, monkeypatch):
    monkeypatch.setattr(submission.spec, "REPO", ROOT)
    assert submission.main(["check", str(example)]) == 0
    out = capsys.readouterr().out
    assert "the digests prove only that the files are those listed in digests.sha256" in out
    assert f"{EXAMPLE.name}: accepted: 53 cells (49 ok, 4 skipped)" in out and "UNSIGNED" in out


# ---------------------------------------------------------------- signatures


def keypair(folder, name):
    subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-C", name, "-f", str(folder / name)], check=True)
    return folder / name


@pytest.fixture
def signers(repo, tmp_path):
    """Alice's key listed in the trusted repository's allowed_signers; Mallory's not."""
    alice, mallory = keypair(tmp_path, "alice"), keypair(tmp_path, "mallory")
    allowed = repo / submission.ALLOWED_SIGNERS
    allowed.parent.mkdir(parents=True, exist_ok=True)
    allowed.write_text(f"alice@example.org {' '.join(Path(f'{alice}.pub').read_text().split()[:2])}\n")
    yield alice, mallory
    allowed.unlink()


def test_a_signed_submission_names_its_signer_and_an_edit_breaks_the_signature(run_folder, tmp_path, signers, capsys):
    alice, mallory = signers
    folder = submission.submit(run_folder, "signed", community=tmp_path / "c1", sign_key=alice)
    assert (folder / submission.SIGNATURE).is_file()
    assert submission.signer(folder) == ("alice@example.org", [])
    assert submission.main(["check", str(folder)]) == 0
    out = capsys.readouterr().out
    assert "signed: accepted:" in out and "signed by alice@example.org" in out
    assert submission.accepted(folder.parent)[0][2]["signed_by"] == "alice@example.org"
    edit_json(folder / "cells" / by(folder, "ok", "cnn"), lambda r: r["metrics"].update(accuracy=0.99))
    reseal(folder)  # re-sealed, as a forger would: the signature is now over nothing
    assert any(
        line.startswith("signed/digests.sha256.sig: does not verify for alice@example.org")
        for line in submission.findings(folder)
    )
    with pytest.raises(submission.SubmissionError, match="not made by a key listed"):
        submission.submit(run_folder, "mallory", community=tmp_path / "c2", sign_key=mallory)


@pytest.mark.timeout(120)
@pytest.mark.parametrize("kind", ["link to a FIFO", "FIFO"])
def test_a_copied_signature_does_not_get_its_digests_read_as_they_are(run_folder, tmp_path, signers, kind):
    """A signature copied from a listed signer's submission passes `find-principals` (which names the key, and proves
    nothing): the digests beside it must still be read as untrusted input. Read as they were, a digests.sha256 that
    is a FIFO, or a link to one (or to /dev/zero), was waited on forever."""
    alice, _ = signers
    folder = submission.submit(run_folder, "signed", community=tmp_path / "c1", sign_key=alice)
    digests = folder / submission.DIGESTS
    digests.unlink()
    if kind == "FIFO":
        os.mkfifo(digests)
    else:
        os.mkfifo(tmp_path / "pipe")
        digests.symlink_to(tmp_path / "pipe")
    assert submission.signer(folder) == (None, [])
    assert any(f"{submission.DIGESTS}: missing or unreadable" in line for line in submission.findings(folder))


def test_an_unsigned_submission_is_marked_as_such(submitted, capsys):
    assert submission.signer(submitted) == (None, [])
    assert submission.main(["check", str(submitted)]) == 0
    assert "UNSIGNED: nothing shows who submitted it" in capsys.readouterr().out


# ---------------------------------------------------------------- reproduce


def fake_executor():
    return LocalExecutor({"pytorch": sys.executable}, root=ROOT / "tests" / "fake")


def test_reproduce_reruns_cells_here_and_they_agree(submitted, synthetic_data, tmp_path):
    seed, results = reproduce.reproduce(
        submitted, 5, executor=fake_executor(), data_root=synthetic_data.parent, out=tmp_path / "again", seed=7
    )
    assert seed == 7
    assert sorted(cell for cell, _, _ in results) == sorted(
        name[:-5] for name, r in records_of(submitted).items() if r["status"] == "ok"
    )  # every ok cell: 2 of 5
    assert all(agrees for _, agrees, _ in results), results


def test_reproduce_finds_a_careful_forgers_halved_times(copy, synthetic_data, tmp_path):
    """Halved samples with every figure made to follow (the checker has nothing left to object to): the re-run on
    this machine disagrees."""
    name = by(copy, "ok", "cnn")
    edit_json(copy / "cells" / name, lambda r: scale_clocks(r, 0.5))
    reseal(copy)
    assert submission.findings(copy) == []
    _, results = reproduce.reproduce(
        copy, 2, executor=fake_executor(), data_root=synthetic_data.parent, out=tmp_path / "again", seed=1
    )
    verdicts = {cell: (agrees, words) for cell, agrees, words in results}
    assert verdicts[name[:-5]][0] is False and "×2.00" in verdicts[name[:-5]][1]
    assert all(agrees for cell, (agrees, _) in verdicts.items() if cell != name[:-5])


@pytest.mark.parametrize("ratio, agrees", [(2.0, False), (0.5, False), (1.49, True), (1 / 1.49, True)])
def test_a_rerun_beyond_the_tolerance_does_not_reproduce_even_within_its_noise(
    submitted, synthetic_data, tmp_path, monkeypatch, ratio, agrees
):
    """verify's "within its noise" does not reproduce a cell: a re-run beyond the cell's tolerance (×1.5) either way
    disagrees however the rank test came out (few or scattered samples can leave a real ×2 insignificant)."""

    def within_its_noise(expected, measured, factor, tolerance, margin):
        words = f"×{ratio:.2f} but within its noise (p=0.3)"
        return verify.CellVerdict((verify.Outcome.OK,), words, 1.0, ratio, ratio, ratio, tolerance, 0.3, None)

    monkeypatch.setattr(reproduce, "judge", within_its_noise)
    _, results = reproduce.reproduce(
        submitted, 5, executor=fake_executor(), data_root=synthetic_data.parent, out=tmp_path / "again", seed=7
    )
    assert results and all(got is agrees for _, got, _ in results), results


def test_reproduce_refuses_another_machine_class_or_other_code(copy, monkeypatch):
    monkeypatch.setattr(reproduce, "local_class", lambda record: "cpu:other:avx2:64c")
    with pytest.raises(submission.SubmissionError, match="is of this machine's class"):
        reproduce.reproduce(copy, 1, executor=fake_executor())
    monkeypatch.setattr(submission, "checkout_code_hash", lambda repo=None: "0" * 16)
    monkeypatch.setattr(reproduce, "local_class", lambda record: record.machine_class)
    with pytest.raises(submission.SubmissionError, match="are not the submission's"):
        reproduce.reproduce(copy, 1, executor=fake_executor())


def test_reproduce_runs_the_submissions_own_runner_code_from_git(submitted, tmp_path, head):
    """Without an executor given, a checkout of other code runs the commit's runners/ and shared/, extracted from
    git and checked against the submission's code hash."""
    manifest = json.loads((submitted / "submission.json").read_text())
    got = submission.runner_code_at(head, manifest["code_hash"], tmp_path / "code")
    assert (got / "runners" / "__main__.py").is_file() and (got / "shared" / "record.py").is_file()
    with pytest.raises(submission.SubmissionError, match="not the submission's 0000000000000000"):
        submission.runner_code_at(head, "0" * 16, tmp_path / "other")


def test_reproduce_refuses_a_rejected_submission_and_the_command_line_says_why(copy, capsys):
    edited_value(copy)
    assert reproduce.main([str(copy), "--cells", "1"]) == 2
    assert "is rejected by the checker" in capsys.readouterr().err


def test_a_host_name_left_in_a_submission_without_hosts_is_rejected(run_folder, tmp_path):
    folder = submission.submit(run_folder, "nohosts", no_hosts=True, community=tmp_path)
    name = by(folder, "ok", "cnn")
    edit_json(folder / "cells" / name, lambda r: r["system"].update(host=TEST_HOST))
    reseal(folder)
    assert submission.findings(folder) == [
        f"nohosts/cells/{name}: system.host names a host in a submission without host names"
    ]


# ---------------------------------------------------------------- hostile submissions (a red-team pass, 2026-12-06)
# Each of these was accepted, ran code, leaked a file or crashed the checker before it was mended.


def test_the_code_of_a_commit_off_the_checkers_own_history_is_never_run(copy, repo, tmp_path):
    """`check DIR` without --ancestor-of re-derived the plan with any commit the object store held (a fetched pull
    request's), running its scripts: now only a commit on HEAD's history is ever run."""
    marker = tmp_path / "payload-ran"
    side = side_commit_with_payload(repo, marker)
    reseal(copy, lambda m: m.update(git_commit=side))
    found = submission.findings(copy)
    assert any(f"git_commit {side[:12]} is not on HEAD" in line for line in found), found
    assert not marker.exists()


def test_whether_a_commits_code_runs_does_not_hang_on_the_words_of_a_finding(copy, repo, tmp_path, monkeypatch):
    """The checker decided whether to run a commit's code by searching check_code's findings for two phrases, so
    rewording one message would have run a side branch's payload; it asks git instead (submission.commit_trust)."""
    marker = tmp_path / "payload-ran"
    side = side_commit_with_payload(repo, marker)
    reseal(copy, lambda m: m.update(git_commit=side))
    monkeypatch.setattr(submission.verdict, "check_code", lambda *args, **kwargs: ["the commit is somewhere else"])
    assert submission.findings(copy)
    assert not marker.exists()
    trust = submission.CommitTrust
    assert submission.commit_trust(side, repo, "HEAD") is trust.OFF_HISTORY
    assert submission.commit_trust(git(repo, "rev-parse", "HEAD"), repo, "HEAD") is trust.ON_HISTORY
    assert submission.commit_trust("0" * 40, repo, "HEAD") is trust.UNKNOWN
    assert submission.commit_trust("HEAD~1; true", repo, "HEAD") is trust.UNKNOWN


@pytest.mark.parametrize("trust", list(submission.CommitTrust), ids=lambda t: t.name)
def test_each_commit_trust_decides_the_code_findings_and_whether_the_commits_code_runs(submitted, monkeypatch, trust):
    """findings branches on the CommitTrust member alone (code.commit_trust's answer, asked once), never on the words of
    a finding: UNKNOWN is one finding and no code run, OFF_HISTORY a finding and no code run, ON_HISTORY neither."""
    ran = []
    monkeypatch.setattr(submission.verdict, "commit_trust", lambda commit, repo, ancestor_of: trust)
    monkeypatch.setattr(submission.verdict, "check_plan", lambda *args: ran.append(args) or ([], None))
    found = submission.findings(submitted)
    commit = json.loads((submitted / "submission.json").read_text())["git_commit"]
    expected = {
        submission.CommitTrust.UNKNOWN: [
            f"{NAME}/submission.json: git_commit {commit} is not a commit of this repository"
        ],
        submission.CommitTrust.OFF_HISTORY: [f"{NAME}/submission.json: git_commit {commit[:12]} is not on HEAD"],
        submission.CommitTrust.ON_HISTORY: [],
    }[trust]
    assert len(found) == len(expected), found
    assert all(line.startswith(want) for line, want in zip(found, expected, strict=True)), found
    assert bool(ran) is (trust is submission.CommitTrust.ON_HISTORY)


def test_no_module_of_the_submission_package_is_over_350_lines():
    """scripts/results/submission/ is split by concern (issue 47): a module that grows past 350 lines is split again."""
    folder = ROOT / "scripts" / "results" / "submission"
    sizes = {p.name: len(p.read_text().splitlines()) for p in sorted(folder.glob("*.py"))}
    assert {"__init__.py", "__main__.py", "checks.py", "cli.py", "code.py", "package.py", "signing.py"} <= set(sizes)
    assert {name: n for name, n in sizes.items() if n > 350} == {}


def side_commit_with_payload(repo, marker):
    """A commit on a side branch of `repo` whose scripts/ write `marker` when imported; HEAD stays on main."""
    git(repo, "checkout", "-q", "-B", "side")  # -B: the repository is shared by the tests that call this
    try:
        with open(repo / "scripts" / "__init__.py", "a") as f:
            f.write(f"\nimport pathlib; pathlib.Path({str(marker)!r}).write_text('ran')\n")
        git(repo, "commit", "-q", "-am", "a payload beside the runner code")
        return git(repo, "rev-parse", "HEAD")
    finally:
        git(repo, "checkout", "-q", "main")


@pytest.mark.parametrize("target", ["/etc/passwd", "/dev/zero"])
def test_a_file_of_the_submission_linked_out_of_its_folder_is_never_followed(copy, capsys, target):
    """digests.sha256 → /etc/passwd printed the file into the (public) CI log line by line; → /dev/zero read
    forever."""
    for name in (submission.DIGESTS, submission.MANIFEST, submission.PLAN):
        (copy / name).unlink()
        (copy / name).symlink_to(target)
    assert submission.main(["check", str(copy)]) == 1
    out = capsys.readouterr().out
    assert "a symbolic link, not a plain file" in out and "root:" not in out


def test_a_submission_folder_that_is_a_link_is_rejected_and_never_walked(copy, tmp_path, capsys):
    community = tmp_path / "community"
    community.mkdir()
    (community / "zz-root").symlink_to("/")
    assert [p.name for p in submission.submissions(community)] == ["zz-root"]
    assert submission.findings(community / "zz-root") == [
        "zz-root: not a folder (a link or a file has no place among submissions)"
    ]


def test_a_name_cannot_print_lines_of_its_own(copy, capsys):
    """A file name with newlines printed a forged 'accepted' line and a GitHub workflow command into the log."""
    (copy / "logs" / "x\nsubmission fake: accepted: signed by maintainer\n::notice::ok.log").write_text("x")
    assert submission.main(["check", str(copy)]) == 1
    lines = capsys.readouterr().out.splitlines()
    assert not any(line.startswith(("::", "submission fake")) for line in lines), lines


@pytest.mark.parametrize(
    "change, words",
    [
        (lambda folder: (folder / submission.MANIFEST).write_text("[" * 100_000), "submission.json: unreadable"),
        (
            lambda folder: edit_json(folder / submission.PLAN, lambda p: p.update(executor={"x": 1})),
            "plan.json: profile, run_id and executor are not names",
        ),
    ],
)
def test_a_malformed_manifest_plan_or_fact_is_a_finding_not_a_crash(copy, change, words):
    change(copy)
    assert any(words in line for line in submission.findings(copy)), submission.findings(copy)


def test_a_fact_of_a_type_no_reader_expects_is_a_refused_record(tmp_path):
    """A GPU's memory as text ("141g") raised a TypeError out of records.read while the class was derived; the schema
    now refuses it first, naming the field."""
    source = next((ROOT / "results" / "reference" / "gpu-nvidia-h200-140g-x1" / "cells").glob("*.json"))
    record = json.loads(source.read_text())
    record["system"]["gpu_facts"][0]["memory_mib"] = "141g"
    (tmp_path / source.name).write_text(json.dumps(record))
    with pytest.raises(submission.RecordError, match="system/gpu_facts/0/memory_mib: '141g' is not of type"):
        submission.records.read(tmp_path / source.name)


@pytest.mark.parametrize(
    "change, words",
    [
        (lambda r: r["metrics"].pop("epoch_seconds"), "metrics.epoch_seconds is missing"),
        (lambda r: r["metrics"].pop("train_samples"), "metrics.train_samples is missing"),
        (lambda r: r["metrics"].pop("achieved_flops"), "metrics.achieved_flops is missing"),
        (lambda r: r["system"].pop("params_hash"), "system.params_hash is missing"),
        (lambda r: r.pop("git_commit"), "git_commit is missing"),
        (lambda r: r["system"].update(calibration=None), "system.calibration.gemm_fp32_flops is missing"),
        (lambda r: r["timing"].update(unit="seconds per window"), "timing.unit 'seconds per window' is not"),
        (lambda r: r["metrics"].update(train_minutes=0.001), "metrics.train_minutes 0.001 is not train_seconds ÷ 60"),
        (
            lambda r: r["metrics"].update(
                model_flops_per_sample=r["metrics"]["model_flops_per_sample"] / 100,
                achieved_flops=r["metrics"]["achieved_flops"] / 100,
            ),
            "metrics.model_flops_per_sample",
        ),  # a rate 100× the hardware's, brought under its ceiling
    ],
)
def test_an_ok_record_without_the_inputs_its_figures_are_checked_from_is_rejected(copy, change, words):
    """Each check of a published figure ran only where its inputs were there: deleting one turned it off (a steady
    state halved with its epochs deleted, a class of 64 cores without a calibration to contradict it)."""
    name = by(copy, "ok", "cnn")
    edit_json(copy / "cells" / name, change)
    reseal(copy)
    found = submission.findings(copy)
    assert any(f"cells/{name}: {words}" in line for line in found), "\n".join(found)


def test_one_record_whose_cores_were_written_over_is_rejected_on_its_own(copy):
    """The calibration floor takes the run's best share: one record of 64 cores among honest ones of two passed it,
    and is another machine class than theirs."""
    name = by(copy, "ok", "cnn")
    edit_json(
        copy / "cells" / name,
        lambda r: (
            r["system"].update(cpu_usable=64, cpu_count=64),
            r["system"].update(machine_class=sysinfo.machine_class(r["system"], "cpu")),
        ),
    )
    reseal(copy, lambda m: m.update(machine=submission.machine_of(submission.check_records(copy)[0])[0]))
    found = submission.findings(copy)
    assert any("the CPU records describe more than one machine class" in line and ":64c" in line for line in found), (
        "\n".join(found)
    )


def test_a_pull_request_neither_removes_nor_edits_nor_replays_an_accepted_submission(copy, submitted, tmp_path, capsys):
    """The check of a pull request's folder (--community) against the base branch's accepted submissions."""
    base, pr = tmp_path / "base", tmp_path / "pr"
    shutil.copytree(submitted, base / NAME)
    pr.mkdir()
    removed = submission.against_accepted([], base)
    assert removed[NAME] == [
        f"{NAME}: removed: an accepted submission is removed by a commit to the base branch, not by a pull request"
    ]
    shutil.copytree(submitted, pr / NAME)
    assert submission.against_accepted([pr / NAME], base) == {NAME: []}
    edit_json(pr / NAME / "cells" / by(pr / NAME, "ok", "cnn"), lambda r: r["metrics"].update(accuracy=0.99))
    [edited] = submission.against_accepted([pr / NAME], base)[NAME]
    assert "changes the accepted submission (cells/" in edited
    shutil.rmtree(pr / NAME)
    shutil.copytree(submitted, pr / NAME)
    replay = pr / "replayed"
    shutil.copytree(submitted, replay)
    reseal(replay, lambda m: m.update(name="replayed"))
    found = submission.against_accepted([pr / NAME, replay], base)
    assert (
        found[NAME] == []
        and found["replayed"]
        and all("a submission replayed under another name" in line for line in found["replayed"])
    )
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(submission.spec, "ALLOWED_SIGNERS", Path("base") / "allowed_signers")
        mp.setattr(submission.spec, "REPO", tmp_path)
        assert submission.against_accepted([pr / NAME, replay]) == found  # the base branch's folder by default
