"""GitHub Actions: the workflows pass the linters a real pipeline runs (actionlint with our runner labels,
check-jsonschema's GitHub-workflow schema), the linters do catch a broken copy, the plan's chunks only ask for
declared labels, bad input is refused before anything is submitted, and the workflow stays in step with
scripts/plan/planfile.py. Fast and offline: no runner, no network."""

import json
import os
import re
import shutil
import subprocess
import sys
from dataclasses import replace
from pathlib import Path

import pytest
import yaml
from conftest import IN_CI, ROOT

from scripts.plan import planfile as plans
from scripts.plan.matrix import load

pytestmark = pytest.mark.unit

WORKFLOWS = ROOT / ".github" / "workflows"
MATRIX_YML = WORKFLOWS / "matrix.yml"
CELLS_YML = WORKFLOWS / "cells.yml"
IMAGES_YML = WORKFLOWS / "images.yml"
DEFAULT_LABELS = {"self-hosted", "linux"}  # GitHub gives every self-hosted Linux runner these (and its arch)


def tool(name):
    """A linter from the host environment (scripts/requirements.txt), next to the interpreter running the tests."""
    path = Path(sys.executable).parent / name
    if not path.exists():
        message = f"{path} missing: rebuild the host environment (`make host`)"
        pytest.fail(message) if IN_CI else pytest.skip(message)
    return str(path)


def actionlint(*files, cwd=ROOT, config=plans.ACTIONLINT):
    # shellcheck and pyflakes are not in the host environment: switched off so that the verdict does not depend on
    # what else the machine has installed.
    return subprocess.run(
        [tool("actionlint"), "-config-file", str(config), "-shellcheck=", "-pyflakes=", "-no-color", *map(str, files)],
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=60,
    )


def workflow(path):
    doc = yaml.safe_load(path.read_text())
    doc["on"] = doc.pop(True, doc.get("on"))  # YAML 1.1 reads the bare key `on` as True
    return doc


# ---------------------------------------------------------------- the real linters


def test_workflows_pass_actionlint_with_the_declared_runner_labels():
    got = actionlint(*sorted(WORKFLOWS.glob("*.yml")))
    assert got.returncode == 0 and not got.stdout.strip(), got.stdout + got.stderr


def test_zizmor_finds_nothing_left_unexplained():
    """zizmor's audit (offline: no network here): every finding is fixed, or opened by a rule in .github/zizmor.yml
    that says why. Actions are pinned by commit SHA with or without that file's help."""
    got = subprocess.run(
        [
            tool("zizmor"),
            "--offline",
            "--no-progress",
            "--config",
            str(ROOT / ".github" / "zizmor.yml"),
            "--format",
            "plain",
            str(WORKFLOWS),
        ],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert got.returncode == 0 and "No findings" in got.stdout + got.stderr, got.stdout + got.stderr
    unexplained = subprocess.run(
        [tool("zizmor"), "--offline", "--no-progress", "--no-config", "--format", "plain", str(WORKFLOWS)],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert "artipacked" not in unexplained.stdout  # persist-credentials: false, without any rule's help
    assert "unpinned-uses" not in unexplained.stdout  # every action by its full commit SHA


def test_every_action_is_pinned_by_a_commit_sha_with_its_tag_beside_it():
    uses = re.findall(r"uses: (\S+)(.*)", "".join(p.read_text() for p in sorted(WORKFLOWS.glob("*.yml"))))
    remote = [(ref, rest) for ref, rest in uses if not ref.startswith("./")]
    assert remote, "no remote action found: the pattern no longer matches the workflows"
    for ref, rest in remote:
        assert re.fullmatch(r"[\w.-]+/[\w.-]+@[0-9a-f]{40}", ref), f"{ref} is not pinned by a full commit SHA"
        assert re.fullmatch(r"\s+# v\d+(\.\d+)*", rest), f"{ref}: say its release tag in a comment ({rest!r})"


def test_workflows_match_githubs_workflow_schema():
    got = subprocess.run(
        [
            tool("check-jsonschema"),
            "--builtin-schema",
            "vendor.github-workflows",
            *map(str, sorted(WORKFLOWS.glob("*.yml"))),
        ],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert got.returncode == 0, got.stdout + got.stderr


@pytest.mark.parametrize(
    "file, old, new, finding",
    [
        (
            "matrix.yml",
            "runs-on: [self-hosted, linux, rosetta, cpu]",
            "runs-on: [self-hosted, linux, rosetta, gpu-h900]",
            'label "gpu-h900" is unknown',
        ),
        ("cells.yml", "timeout-minutes:", "timeout-minute:", 'unexpected key "timeout-minute"'),
        ("images.yml", "steps.push.outputs.digest", "steps.pushed.outputs.digest", 'property "pushed" is not defined'),
    ],
)
def test_actionlint_catches_an_undeclared_label_and_a_misspelled_key(tmp_path, file, old, new, finding):
    """The check above can fail: a broken copy of the workflows is refused, with the reason."""
    shutil.copytree(ROOT / ".github", tmp_path / ".github")
    broken = tmp_path / ".github" / "workflows" / file
    assert old in broken.read_text()
    broken.write_text(broken.read_text().replace(old, new, 1))
    got = actionlint(
        *(tmp_path / ".github" / "workflows").glob("*.yml"),
        cwd=tmp_path,
        config=tmp_path / ".github" / "actionlint.yaml",
    )
    assert got.returncode != 0 and finding in got.stdout, got.stdout + got.stderr


# ---------------------------------------------------------------- scripts.plan.planfile's GitHub part


def synthetic_plan(n):
    """A plan of `n` distinct CPU cells (one smoke cell under `n` scale names): bigger than any profile."""
    smoke = plans.make(load(), "smoke", "synthetic")
    one = smoke.cells[0]
    return replace(smoke, cells=tuple(replace(one, cell=replace(one.cell, scale=f"s{i}")) for i in range(n)))


def test_full_profile_chunks_ask_only_for_declared_labels():
    plan_file = plans.make(load(), "full", "full-test")
    labels = plans.runner_labels()
    chunks = plans.github_chunks(plan_file, "h100", labels)
    assert len(chunks) == plans.GITHUB_CHUNKS
    assert all(len(chunk) <= plans.GITHUB_MATRIX_LIMIT for chunk in chunks)
    jobs = [job for chunk in chunks for job in chunk]
    assert [job["id"] for job in jobs] == [c.id for c in plan_file.cells]  # every cell once, in the plan's order
    assert len({job["id"] for job in jobs}) == len(jobs)
    for job, planned in zip(jobs, plan_file.cells, strict=False):
        assert set(job["runs-on"]) <= set(labels) | DEFAULT_LABELS, job
        assert {"gpu-h100", f"gpus-{planned.cell.gpus}"} <= set(job["runs-on"]), job
        assert job["image"] == planned.image


@pytest.mark.parametrize(
    "n, fits",
    [
        (plans.GITHUB_MATRIX_LIMIT * plans.GITHUB_CHUNKS, True),
        (plans.GITHUB_MATRIX_LIMIT * plans.GITHUB_CHUNKS + 1, False),
    ],
)
def test_a_plan_beyond_the_chunks_is_refused_with_what_to_split(n, fits):
    plan_file = synthetic_plan(n)
    if fits:
        chunks = plans.github_chunks(plan_file, None, plans.runner_labels())
        assert [len(c) for c in chunks] == [plans.GITHUB_MATRIX_LIMIT] * plans.GITHUB_CHUNKS
        return
    with pytest.raises(plans.PlanError, match=rf"{n} cells.*split the profile"):
        plans.github_chunks(plan_file, None, plans.runner_labels())


def test_a_cell_needing_more_gpus_than_any_runner_offers_is_refused():
    plan_file = plans.make(load(), "full", "full-test")
    big = replace(plan_file.cells[0], cell=replace(plan_file.cells[0].cell, gpus=16))
    with pytest.raises(plans.PlanError, match=r"gpus-16.*GPU counts offered: \[1, 2, 4, 8\]"):
        plans.github_chunks(replace(plan_file, cells=(big,)), "h100", plans.runner_labels())


def test_an_unknown_gpu_model_is_refused_naming_the_declared_ones():
    plan_file = plans.make(load(), "full", "full-test")
    with pytest.raises(plans.PlanError, match=r"unknown GPU model .h900.*declare .*h100"):
        plans.github_chunks(plan_file, "h900", plans.runner_labels())


@pytest.mark.parametrize(
    "argv, message",
    [
        (["--profile", "nope"], "unknown profile 'nope'; defined: demo"),
        (["--profile", "full"], "name the runners' GPU model (--gpu-model)"),
        (["--profile", "full", "--gpu-model", "h900"], "gpu-h900"),
    ],
)
def test_bad_input_is_refused_before_anything_is_written(tmp_path, capsys, argv, message):
    out, plan_json = tmp_path / "github_output", tmp_path / "plan.json"
    assert plans.main([*argv, "--out", str(plan_json), "--github-output", str(out)]) == 2
    assert message in capsys.readouterr().err
    assert not out.exists() and not plan_json.exists()


def test_github_output_end_to_end_for_the_smoke_profile(tmp_path):
    """What the plan job's step does: appends run_id and chunk-0… to $GITHUB_OUTPUT, one JSON list per chunk."""
    out, plan_json = tmp_path / "github_output", tmp_path / "plan.json"
    out.write_text("earlier=kept\n")  # GitHub's file may hold other steps' outputs: append, never truncate
    subprocess.run(
        [
            sys.executable,
            "-m",
            "scripts.plan.planfile",
            "--profile",
            "smoke",
            "--run-id",
            "smoke-gha",
            "--out",
            str(plan_json),
            "--github-output",
            str(out),
        ],
        cwd=ROOT,
        check=True,
        timeout=120,
        capture_output=True,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
    )
    lines = out.read_text().splitlines()
    assert lines[0] == "earlier=kept"
    outputs = dict(line.split("=", 1) for line in lines[1:])
    assert list(outputs) == ["run_id"] + [f"chunk-{i}" for i in range(plans.GITHUB_CHUNKS)]
    assert outputs["run_id"] == "smoke-gha" == json.loads(plan_json.read_text())["run_id"]
    chunks = [json.loads(outputs[f"chunk-{i}"]) for i in range(plans.GITHUB_CHUNKS)]
    assert [job["id"] for job in chunks[0]] == [c["id"] for c in json.loads(plan_json.read_text())["cells"]]
    assert all(job["runs-on"] == ["self-hosted", "linux", "rosetta", "cpu"] for job in chunks[0])
    assert chunks[1:] == [[]] * (plans.GITHUB_CHUNKS - 1)


# ---------------------------------------------------------------- the workflow in step with scripts/plan/planfile.py


def test_matrix_workflow_has_one_cells_job_per_chunk_and_merges_them_all():
    jobs = workflow(MATRIX_YML)["jobs"]
    chunk_jobs = sorted(name for name in jobs if name.startswith("cells-"))
    assert chunk_jobs == [f"cells-{i}" for i in range(plans.GITHUB_CHUNKS)]
    for i, name in enumerate(chunk_jobs):
        job = jobs[name]
        assert job["needs"] == "plan" and job["uses"] == "./.github/workflows/cells.yml"
        assert job["if"] == f"needs.plan.outputs.chunk-{i} != '[]'"  # an empty include list is an error
        assert job["with"]["cells"] == f"${{{{ needs.plan.outputs.chunk-{i} }}}}"
    assert set(jobs["merge"]["needs"]) == {"plan", *chunk_jobs}
    assert "always()" in jobs["merge"]["if"]  # failed cells fail their chunk job; the report still comes


def test_every_output_the_plan_step_writes_is_declared_by_the_plan_job(tmp_path):
    out = tmp_path / "github_output"
    assert plans.main(["--profile", "smoke", "--out", str(tmp_path / "plan.json"), "--github-output", str(out)]) == 0
    written = {line.split("=", 1)[0] for line in out.read_text().splitlines()}
    plan_job = workflow(MATRIX_YML)["jobs"]["plan"]
    step_ids = [step.get("id") for step in plan_job["steps"] if "scripts.plan" in step.get("run", "")]
    assert step_ids == ["plan"]
    assert plan_job["outputs"] == {name: f"${{{{ steps.plan.outputs.{name} }}}}" for name in written}


def test_gpu_model_choices_are_the_declared_gpu_labels():
    choices = workflow(MATRIX_YML)["on"]["workflow_dispatch"]["inputs"]["gpu-model"]["options"]
    assert sorted(f"gpu-{model}" for model in choices) == sorted(
        label for label in plans.runner_labels() if label.startswith("gpu-")
    )


def test_cell_jobs_outlast_every_profiles_cell_timeout():
    """The job's limit must leave the cell's own timeout to fire first, so a slow cell still leaves a record."""
    job = workflow(CELLS_YML)["jobs"]["cell"]
    matrix = load()
    longest = max(plans.make(matrix, name, "t").plan.timeout_s / 60 for name in matrix.profiles)
    assert job["timeout-minutes"] > longest
    assert job["strategy"]["fail-fast"] is False
    assert job["runs-on"] == "${{ matrix.runs-on }}"
    uploads = [step for step in job["steps"] if step.get("uses", "").startswith("actions/upload-artifact@")]
    assert len(uploads) == 1 and uploads[0]["if"] == "always()"
    assert re.fullmatch(r"record-\$\{\{ matrix\.id \}\}.*", uploads[0]["with"]["name"])


# ---------------------------------------------------------------- images.yml: the published images


def test_images_workflow_publishes_on_tags_with_least_privilege():
    doc = workflow(IMAGES_YML)
    assert doc["on"] == {"push": {"tags": ["v*"]}} and doc["permissions"] == {}
    jobs = doc["jobs"]
    writers = {name for name, job in jobs.items() if set(job["permissions"].values()) - {"read"}}
    assert writers == {"image"}  # only the job that pushes may write, and only there
    assert jobs["image"]["permissions"] == {
        "contents": "read",
        "packages": "write",
        "id-token": "write",
        "attestations": "write",
    }
    assert jobs["image"]["strategy"]["matrix"]["include"] == "${{ fromJSON(needs.list.outputs.images) }}"
    steps = jobs["image"]["steps"]
    push = next(step for step in steps if step.get("id") == "push")
    assert "--push" in push["run"] and "$GITHUB_OUTPUT" in push["run"]
    attest = next(step for step in steps if step.get("uses", "").startswith("actions/attest-build-provenance@"))
    assert attest["with"] == {
        "subject-name": "${{ steps.push.outputs.name }}",
        "subject-digest": "${{ steps.push.outputs.digest }}",
        "push-to-registry": True,
    }
    assert steps.index(push) < steps.index(attest)


def test_images_workflow_lists_every_full_profile_image_and_each_familys_cpu_image(tmp_path):
    """What the list job's step writes: one job per image, each buildable alone by its framework id and variant."""
    out = tmp_path / "github_output"
    subprocess.run(
        [
            sys.executable,
            "-m",
            "scripts.launch.images",
            "--profile",
            "full",
            "--and-cpu",
            "--list",
            "--github-output",
            str(out),
        ],
        cwd=ROOT,
        check=True,
        capture_output=True,
        timeout=120,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
    )
    (line,) = out.read_text().splitlines()
    name, _, listed = line.partition("=")
    jobs = json.loads(listed)
    assert name == "images"
    matrix = load()
    wanted = {c.image for c in plans.make(matrix, "full", "t").cells}
    wanted |= {fw.variants["cpu"].image(fw.family) for fw in matrix.frameworks.values() if "cpu" in fw.variants}
    assert {job["image"] for job in jobs} == wanted and len(jobs) == len(wanted)
    for job in jobs:
        fw = matrix.frameworks[job["framework"]]
        assert fw.variants[job["variant"]].image(fw.family) == job["image"]


# ---------------------------------------------------------------- self-hosted runners and forks (docs/security.md)

from scripts.launch import workflow_trust  # noqa: E402


def test_no_event_a_fork_can_cause_reaches_a_self_hosted_runner_in_any_workflow():
    assert workflow_trust.findings(WORKFLOWS) == []
    assert workflow_trust.main([str(WORKFLOWS)]) == 0


def mutated(tmp_path, file, old, new):
    """A copy of every workflow with one edit made in `file`."""
    folder = tmp_path / "workflows"
    shutil.copytree(WORKFLOWS, folder)
    text = (folder / file).read_text()
    assert old in text, f"{old!r} not in {file}: the test no longer matches the workflow"
    (folder / file).write_text(text.replace(old, new, 1))
    return folder


@pytest.mark.parametrize(
    "file, old, new, expected",
    [
        # a fork's pull request on the GPU matrix: matrix.yml's own jobs and, through workflow_call, cells.yml's
        (
            "matrix.yml",
            "on:\n  workflow_dispatch:",
            "on:\n  pull_request:\n  workflow_dispatch:",
            [
                "cells.yml: job cell: may run on a self-hosted runner",
                "matrix.yml: job plan: may run on a self-hosted runner",
                "matrix.yml: job merge: may run on a self-hosted runner",
            ],
        ),
        (
            "images.yml",
            "on:\n  push:",
            "on:\n  pull_request_target:\n  push:",
            ["images.yml: job list: may run", "images.yml: job image: may run", "images.yml: job digests: may run"],
        ),
        (
            "images.yml",
            "on:\n  push:",
            "on:\n  workflow_run:\n    workflows: [site]\n  push:",
            ["images.yml: job list: may run", "images.yml: job image: may run", "images.yml: job digests: may run"],
        ),
        # the submissions check moved onto a self-hosted runner: the pull request reaches it
        (
            "submissions.yml",
            "runs-on: ubuntu-24.04",
            "runs-on: [self-hosted, linux, rosetta, cpu]",
            ["submissions.yml: job check: may run on a self-hosted runner"],
        ),
        (
            "submissions.yml",
            "runs-on: ubuntu-24.04",
            "runs-on: ${{ vars.RUNNER }}",
            ["submissions.yml: job check: may run on a self-hosted runner"],
        ),
        (
            "submissions.yml",
            "runs-on: ubuntu-24.04",
            "runs-on:\n      group: gpus",
            ["submissions.yml: job check: may run on a self-hosted runner"],
        ),
        # a self-hosted label spelled like a GitHub-hosted image: a pull request reaches the runner that carries it
        (
            "submissions.yml",
            "runs-on: ubuntu-24.04",
            "runs-on: ubuntu-h100-rosetta",
            ["submissions.yml: job check: may run on a self-hosted runner ('ubuntu-h100-rosetta')"],
        ),
        # a trigger the check does not know who can cause (anyone may edit a public wiki): a finding on any runner …
        (
            "site.yml",
            "on:\n  push:",
            "on:\n  gollum:\n  push:",
            ["site.yml: job *: started by gollum, an event this check does not know who can cause"],
        ),
        # … and never a trusted event for a self-hosted runner
        (
            "matrix.yml",
            "on:\n  workflow_dispatch:",
            "on:\n  gollum:\n  workflow_dispatch:",
            [
                "matrix.yml: job *: started by gollum",
                "cells.yml: job cell: may run on a self-hosted runner ('${{ matrix.runs-on }}') and is started by",
                "matrix.yml: job plan: may run on a self-hosted runner",
                "matrix.yml: job merge: may run on a self-hosted runner",
            ],
        ),
        ("images.yml", 'tags: ["v*"]', "{}", ["images.yml: job *: `push` without `branches` or `tags`"]),
        (
            "matrix.yml",
            "persist-credentials: false   # no later step pushes; the token stays out of .git/config\n",
            "persist-credentials: false\n          clean: false\n",
            ["matrix.yml: job plan: checks out with `clean: false`"],
        ),
        (
            "images.yml",
            'echo "DOCKER_CONFIG=$RUNNER_TEMP/docker-config" >> "$GITHUB_ENV"',
            "true",
            ["images.yml: job image: runs `docker login` without a job-scoped DOCKER_CONFIG"],
        ),
    ],
)
def test_the_trust_check_refuses_each_path_to_a_self_hosted_runner(tmp_path, capsys, file, old, new, expected):
    found = [str(f) for f in workflow_trust.findings(mutated(tmp_path, file, old, new))]
    assert len(found) == len(expected), "\n".join(found)
    for want, got in zip(sorted(expected), sorted(found), strict=False):
        assert got.startswith(want), "\n".join(found)
    assert workflow_trust.main([str(tmp_path / "workflows")]) == 1
    assert capsys.readouterr().out.splitlines()[-1].endswith(f"{len(expected)} finding(s)")


def test_a_pull_request_on_a_github_hosted_runner_is_fine_and_hosted_labels_are_told_apart():
    for labels in ("ubuntu-24.04", ["macos-15"], "ubuntu-latest", "macos-14-xlarge", "windows-11-arm"):
        assert not workflow_trust.may_be_self_hosted(labels), labels
    for labels in (
        "self-hosted",
        ["ubuntu-24.04", "gpu"],
        "${{ matrix.runs-on }}",
        {"group": "g"},
        [],
        "ubuntu-h100-rosetta",  # anyone may give a self-hosted runner a label that looks like a hosted image
        "ubuntu-24.04-gpu",
        ["macos-15-m4"],
        "windows-2022-h100",
    ):
        assert workflow_trust.may_be_self_hosted(labels), labels


def test_zizmor_auditor_self_hosted_findings_are_each_answered_in_docs_security():
    """--persona auditor reports every self-hosted job; each one must have its row in docs/security.md."""
    got = subprocess.run(
        [tool("zizmor"), "--offline", "--no-progress", "--persona", "auditor", "--format", "json", str(WORKFLOWS)],
        capture_output=True,
        text=True,
        timeout=120,
    )
    jobs = set()
    for finding in json.loads(got.stdout):
        if finding["ident"] == "self-hosted-runner":
            for location in finding["locations"]:
                route = [step.get("Key") for step in location["symbolic"]["route"]["route"]]
                path = Path(location["symbolic"]["key"]["Local"]["verbatim_path"]).name
                jobs.add((path, route[route.index("jobs") + 1]))
    assert jobs, "zizmor reported no self-hosted job: the test no longer reads its output"
    doc = (ROOT / "docs" / "security.md").read_text()
    for path, job in sorted(jobs):
        assert f"| `{path}` job `{job}` |" in doc, f"zizmor's self-hosted finding {path}/{job} is not answered"


def test_the_images_workflow_publishes_from_its_own_runners_with_a_job_scoped_docker_config():
    doc = workflow(IMAGES_YML)
    for job in doc["jobs"].values():
        assert job["runs-on"] == ["self-hosted", "linux", "rosetta", "publish"]
    steps = doc["jobs"]["image"]["steps"]
    runs = [step.get("run", "") for step in steps]
    scoped = next(i for i, run in enumerate(runs) if "DOCKER_CONFIG=$RUNNER_TEMP/" in run and "GITHUB_ENV" in run)
    login = next(i for i, run in enumerate(runs) if "docker login" in run)
    assert scoped < login
    assert "publish" in plans.runner_labels()
    assert "clean: false" not in "".join(p.read_text() for p in WORKFLOWS.glob("*.yml"))
