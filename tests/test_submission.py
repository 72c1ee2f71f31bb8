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
    return [f"cells/{target}: its samples are those of cells/{source} times one factor", ...]
    # … and what a CNN's figures lack as a ResNet-50's (images, its unit, its batch): findings of their own


def scaled_copy(folder):
    """The same, every clock of the CNN cell's copy read × (1 + 1e-9): not one sample equal to the last digit, every
    figure in step with them (a red team's forgery that the comparison of exact values let through)."""
    source, target = by(folder, "ok", "cnn"), by(folder, "skipped")
    donor = scale_clocks(json.loads((folder / "cells" / source).read_text()), 1 + 1e-9)
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
    assert not set(donor["timing"]["values"]) & set(records_of(folder)[source]["timing"]["values"])
    return [f"cells/{target}: its samples are those of cells/{source} times one factor", ...]


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
    return [  # the twin is the CNN cell's clocks × 0.9: its samples are a copy of them, scaled
        f"cells/{name}: its samples are those of cells/{new_id}.json times one factor",
        f"plan.json: cell {new_id} is not in profile smoke's plan at commit",
    ]


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
        scaled_copy,
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
    """pull_request_target: GitHub runs the base branch's workflow file and checker (on pull_request it ran the pull
    request's own edit of them, which passed). The pull request is git objects only: fetched into the base's checkout,
    never checked out, never run; its SHAs reach the scripts through env, never spliced into them; the token reads."""
    doc = yaml.safe_load(WORKFLOW.read_text())
    on = doc.pop(True, doc.get("on"))
    assert on == {"pull_request_target": {"paths": ["results/community/**"]}}
    assert doc["permissions"] == {"contents": "read"}
    job = doc["jobs"]["check"]
    assert job["runs-on"] == "ubuntu-24.04" and "permissions" not in job
    steps = job["steps"]
    [checkout] = [step for step in steps if "uses" in step]  # the one checkout: the base's
    assert checkout["uses"].startswith("actions/checkout@")
    assert checkout["with"] == {
        "ref": "${{ github.event.pull_request.base.sha }}",
        "persist-credentials": False,
        "fetch-depth": 0,
    }
    assert [step["run"] for step in steps if "run" in step] == [
        'git fetch --no-tags --no-recurse-submodules origin "$HEAD_SHA"',
        "make host PYTHON_VERSION=3",
        '.venv/host/bin/python -m scripts.results.submission check-pr --base "$BASE_SHA" --head "$HEAD_SHA"',
    ]
    assert {key: value for step in steps for key, value in (step.get("env") or {}).items()} == {
        "HEAD_SHA": "${{ github.event.pull_request.head.sha }}",
        "BASE_SHA": "${{ github.event.pull_request.base.sha }}",
    }


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


# ---------------------------------------------------------------- a pull request, read from git objects (check-pr)

COMMUNITY = "results/community"
NEW = NAME  # the submission the tests made: its manifest names its folder


def plumb(repo, *args, env=None, data=None):
    done = subprocess.run(["git", *GIT_ID, *args], cwd=repo, input=data, capture_output=True, check=True, env=env)
    return done.stdout.decode().strip()


def commit_on(repo, parent, add=None, remove=(), index=None):
    """A commit on top of `parent` made with git's plumbing in a private index: the work tree and the branches are
    left as they are (the module's repository is shared). `add`: {path: (mode, bytes)}, a submodule's bytes its
    commit; `remove`: paths or folders."""
    env = {**os.environ, "GIT_INDEX_FILE": str(index)}
    plumb(repo, "read-tree", parent, env=env)
    for path in remove:
        plumb(repo, "rm", "--cached", "-r", "-q", path, env=env)
    for path, (mode, data) in (add or {}).items():
        sha = data.decode() if mode == "160000" else plumb(repo, "hash-object", "-w", "--stdin", data=data)
        plumb(repo, "update-index", "--add", "--cacheinfo", f"{mode},{sha},{path}", env=env)
    tree = plumb(repo, "write-tree", env=env)
    return plumb(repo, "commit-tree", tree, "-p", parent, "-m", "a pull request", env=env)


def folder_files(folder, name):
    return {f"{COMMUNITY}/{name}/{rel}": ("100644", (folder / rel).read_bytes()) for rel in submission.contents(folder)}


@pytest.fixture(scope="module")
def pr_base(repo, head, tmp_path_factory):
    """The base branch of the simulated pull requests: the test repository's HEAD plus results/community with its
    allowed_signers, README and one accepted submission (the committed example: only its files are compared)."""
    index = tmp_path_factory.mktemp("index") / "index"
    return commit_on(
        repo,
        head,
        {
            f"{COMMUNITY}/allowed_signers": ("100644", b"maintainer@example.org ssh-ed25519 AAAA\n"),
            f"{COMMUNITY}/README.md": ("100644", b"# community\n"),
            **folder_files(EXAMPLE, EXAMPLE.name),
        },
        index=index,
    )


def honest(submitted):
    return folder_files(submitted, NEW)


def edited_workflow(submitted):
    return {**honest(submitted), ".github/workflows/submissions.yml": ("100644", b"on: pull_request\n")}, ()


def community_linked(submitted):
    return {COMMUNITY: ("120000", b"/tmp/a-folder-of-my-choosing")}, (COMMUNITY,)


def signers_edited(submitted):
    return {**honest(submitted), f"{COMMUNITY}/allowed_signers": ("100644", b"maintainer@example.org mallory\n")}, ()


def link_inside(submitted):
    return {**honest(submitted), f"{COMMUNITY}/{NEW}/logs/x.log": ("120000", b"/etc/passwd")}, ()


def executable_inside(submitted):
    return {**honest(submitted), f"{COMMUNITY}/{NEW}/logs/x.log": ("100755", b"#!/bin/sh\n")}, ()


def submodule_inside(submitted):
    return {**honest(submitted), f"{COMMUNITY}/{NEW}/logs/x": ("160000", b"1" * 40)}, ()


def second_folder(submitted):
    return {**honest(submitted), **folder_files(submitted, "second")}, ()


def existing_edited(submitted):
    rel = f"{COMMUNITY}/{EXAMPLE.name}/{submission.MANIFEST}"
    return {**honest(submitted), rel: ("100644", b"{}\n")}, ()


def added_to_existing(submitted):
    return {f"{COMMUNITY}/{EXAMPLE.name}/logs/more.log": ("100644", b"more\n")}, ()


def existing_deleted(submitted):
    return honest(submitted), (f"{COMMUNITY}/{EXAMPLE.name}/{submission.PLAN}",)


def unsafe_name(submitted):
    return folder_files(submitted, "-rf"), ()


def nothing(submitted):
    return {"README.md": ("100644", b"a pull request that is no submission\n")}, ()


@pytest.mark.parametrize(
    "attack, words",
    [
        (edited_workflow, ".github/workflows/submissions.yml: edits a path outside a new submission folder"),
        (community_linked, f"{COMMUNITY}: adds a path outside a new submission folder"),
        (community_linked, f"{COMMUNITY}/allowed_signers: deletes a path outside"),
        (signers_edited, f"{COMMUNITY}/allowed_signers: edits a path outside"),
        (link_inside, f"{COMMUNITY}/{NEW}/logs/x.log: a symbolic link, not a plain file"),
        (executable_inside, f"{COMMUNITY}/{NEW}/logs/x.log: an executable, not a plain file"),
        (submodule_inside, f"{COMMUNITY}/{NEW}/logs/x: a submodule, not a plain file"),
        (second_folder, f"adds 2 folders (second, {NEW}): one submission a pull request"),
        (existing_edited, f"{COMMUNITY}/{EXAMPLE.name}/{submission.MANIFEST}: edits a path outside"),
        (added_to_existing, f"{COMMUNITY}/{EXAMPLE.name}: exists in the base"),
        (existing_deleted, f"{COMMUNITY}/{EXAMPLE.name}/{submission.PLAN}: deletes a path outside"),
        (unsafe_name, "-rf: not a submission's name"),
        (nothing, "README.md: edits a path outside"),
    ],
    ids=lambda value: getattr(value, "__name__", "words"),
)
def test_a_pull_request_that_does_more_than_add_one_new_folder_of_plain_files_is_refused_unread(
    repo, pr_base, submitted, tmp_path, capsys, attack, words
):
    """Each red-team bypass of the workflow's old check, as a real pull request's commit on a base: found in `git diff
    --raw BASE...HEAD` (what git holds, not a checkout), and the submission is never read."""
    add, remove = attack(submitted)
    pr_head = commit_on(repo, pr_base, add, remove, index=tmp_path / "index")
    name, files, found = submission.pr_findings(pr_base, pr_head)
    assert name is None and files == [] and any(line.startswith(words) for line in found), "\n".join(found)
    assert submission.main(["check-pr", "--base", pr_base, "--head", pr_head]) == 1
    out = capsys.readouterr().out
    assert f"ERROR {words}" in out and "REJECTED before any of it is read" in out and "accepted" not in out


def test_a_pull_request_that_adds_one_new_folder_of_plain_files_is_checked_and_accepted(
    repo, pr_base, submitted, tmp_path, capsys
):
    pr_head = commit_on(repo, pr_base, honest(submitted), index=tmp_path / "index")
    name, files, found = submission.pr_findings(pr_base, pr_head[:12])
    assert (name, found) == (NEW, []) and {c.path for c in files} == set(honest(submitted))
    assert submission.main(["check-pr", "--base", pr_base, "--head", pr_head]) == 0
    out = capsys.readouterr().out.splitlines()
    assert out[-2].startswith(f"submission {NEW}: accepted:") and out[-1].endswith("1 accepted, 0 rejected")
    # the same folder with a skipped cell turned ok by a scaled copy: the base's checker reads it, and refuses it
    scaled = Path(shutil.copytree(submitted, tmp_path / NEW))
    scaled_copy(scaled)
    pr_head = commit_on(repo, pr_base, folder_files(scaled, NEW), index=tmp_path / "index")
    assert submission.main(["check-pr", "--base", pr_base, "--head", pr_head]) == 1
    out = capsys.readouterr().out
    assert "times one factor" in out and out.splitlines()[-1].endswith("0 accepted, 1 rejected")


def test_check_pr_holds_the_new_folder_against_the_bases_accepted_submissions(repo, pr_base, tmp_path, capsys):
    """The base's accepted submissions are read from git objects at --base: a copy of one under a new name, its
    clocks scaled, is a replay; a base or head that is not a commit here is refused before anything is read."""
    replay = Path(shutil.copytree(EXAMPLE, tmp_path / "replayed"))
    name = "jax-cnn-cpu-fp32-1cpu.json"
    edit_json(replay / "cells" / name, lambda r: scale_clocks(r, 1 + 1e-9))
    reseal(replay, lambda m: m.update(name="replayed"))
    pr_head = commit_on(repo, pr_base, folder_files(replay, "replayed"), index=tmp_path / "index")
    assert submission.main(["check-pr", "--base", pr_base, "--head", pr_head]) == 1
    out = capsys.readouterr().out
    assert f"ERROR replayed/cells/{name}: its samples are those of {EXAMPLE.name}/cells/{name} times one factor" in out
    assert "a submission replayed under another name" in out
    assert submission.main(["check-pr", "--base", pr_base, "--head", "f" * 40]) == 1
    assert "not both commits here" in capsys.readouterr().out


def test_a_signature_that_is_a_link_is_refused(run_folder, tmp_path, signers):
    """A link to a signature that verifies (a listed signer's, kept elsewhere) names no one: the file is refused."""
    alice, _ = signers
    folder = submission.submit(run_folder, "signed", community=tmp_path / "c1", sign_key=alice)
    kept = tmp_path / "kept.sig"
    (folder / submission.SIGNATURE).rename(kept)
    (folder / submission.SIGNATURE).symlink_to(kept)
    assert submission.signer(folder) == (None, [f"{submission.SIGNATURE}: not a plain file"])
    assert f"signed/{submission.SIGNATURE}: not a plain file" in submission.findings(folder)


def test_an_accepted_submission_replaced_by_a_link_is_refused(submitted, tmp_path):
    """The link leads to the very files accepted: only the link itself tells."""
    base, pr = tmp_path / "base", tmp_path / "pr"
    shutil.copytree(submitted, base / NAME)
    pr.mkdir()
    (pr / NAME).symlink_to(base / NAME)
    assert submission.against_accepted([pr / NAME], base) == {
        NAME: [f"{NAME}: an accepted submission replaced by a link"]
    }


def test_check_community_reports_each_finding_against_the_accepted_ones(repo, submitted, tmp_path, capsys):
    """`check --community DIR`, layer by layer: a folder of DIR is held against REPO's accepted submissions (removed,
    edited) and the verdict counts what that finds, even where the folder's own checks find nothing; DIR that is the
    accepted folder itself is not held against itself."""
    accepted_here = repo / COMMUNITY / NAME
    shutil.copytree(submitted, accepted_here)
    try:
        pr = tmp_path / "pr"
        pr.mkdir()
        assert submission.main(["check", "--community", str(pr)]) == 1  # removed
        out = capsys.readouterr().out.splitlines()
        assert out[-2].startswith(f"ERROR {NAME}: removed") and out[-1] == (
            "0 submission(s) checked: 0 accepted, 1 rejected (1 accepted one(s) removed)"
        )
        shutil.copytree(submitted, pr / NAME)
        assert submission.main(["check", "--community", str(pr)]) == 0  # the same files
        capsys.readouterr()
        edit_json(pr / NAME / "cells" / by(pr / NAME, "ok", "cnn"), lambda r: r["metrics"].update(accuracy=0.95))
        reseal(pr / NAME)
        assert submission.findings(pr / NAME) == []  # its own checks pass: only the accepted one tells
        assert submission.main(["check", "--community", str(pr)]) == 1
        out = capsys.readouterr().out.splitlines()
        assert out[-3].startswith(f"ERROR {NAME}: changes the accepted submission (cells/")
        assert out[-1] == "1 submission(s) checked: 0 accepted, 1 rejected"
        assert submission.main(["check", "--community", str(repo / COMMUNITY)]) == 0  # the accepted folder itself
    finally:
        shutil.rmtree(accepted_here)
