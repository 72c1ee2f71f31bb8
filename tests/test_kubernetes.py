"""Kubernetes Indexed Jobs from a plan (scripts/launch/k8s.py): the manifests pass the real schema validator for every
version claimed, the fields it cannot check (enums, limits, names) are checked here, the pod's command picks the
right cell, and a plan or option the backend cannot take is refused before anything is written."""

import json
import os
import re
import shlex
import subprocess
import sys
from pathlib import Path

import pytest
import yaml
from conftest import ROOT

from scripts.launch import k8s
from scripts.launch.executors import RunSettings, runner_args
from scripts.plan import planfile as plans
from scripts.plan.matrix import Cell, load
from shared import buildinfo
from shared.record import read_record

pytestmark = pytest.mark.unit

VALIDATOR = Path(sys.executable).parent / "kubernetes-validate"
PER_INDEX_VERSIONS = ["1.29.0", "1.31.0", "1.33.0", "1.37.0"]  # backoffLimitPerIndex form (1.37: newest bundled)
BACKOFF_VERSIONS = ["1.25.0", "1.27.0", "1.28.0"]  # backoffLimit form; 1.25: oldest bundled
DNS_LABEL = re.compile(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?")
LABEL_VALUE = re.compile(r"([A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?)?")
ARGS = [
    "--image-prefix",
    "registry.example.org/",
    "--data-claim",
    "rosetta-data",
    "--results-claim",
    "rosetta-results",
    "--parallelism",
    "3",
]


@pytest.fixture(scope="module")
def plan_paths(tmp_path_factory):
    """The full profile's plan and the smoke profile's, the latter under a run id that needs cleaning for DNS names
    (capitals, dots, underscores; a run id that needs shell quoting is refused: tests/test_untrusted.py)."""
    root = tmp_path_factory.mktemp("plans")
    matrix = load()
    paths = {"full": root / "full.json", "smoke": root / "smoke.json"}
    plans.write(paths["full"], plans.make(matrix, "full", "full-20260101-000000"))
    plans.write(paths["smoke"], plans.make(matrix, "smoke", "Smoke_Run.1"))
    return paths


def generate(plan_path, out, *extra):
    assert k8s.main([str(plan_path), *ARGS, "--out", str(out), *extra]) == 0
    return list(yaml.safe_load_all(out.read_text()))


def validate(path, version):
    done = subprocess.run(
        [str(VALIDATOR), "--strict", "--quiet", "-k", version, str(path)], capture_output=True, text=True, timeout=120
    )
    return done.returncode, done.stdout + done.stderr


def jobs_and_cells(docs):
    """[(Job, its ConfigMap's lines split back into argument lists)]."""
    maps = {d["metadata"]["name"]: d for d in docs if d["kind"] == "ConfigMap"}
    return [
        (d, [shlex.split(line) for line in maps[d["metadata"]["name"]]["data"]["cells"].splitlines()])
        for d in docs
        if d["kind"] == "Job"
    ]


# ---------------------------------------------------------------- the schema validator, for each version claimed


@pytest.mark.parametrize("version", PER_INDEX_VERSIONS + BACKOFF_VERSIONS)
def test_manifests_pass_the_validator_of_each_claimed_version(plan_paths, tmp_path, version):
    out = tmp_path / "jobs.yaml"
    docs = []
    for name in ("full", "smoke"):
        docs += generate(plan_paths[name], tmp_path / f"{name}.yaml", "--kube-version", version)
    out.write_text(yaml.safe_dump_all(docs))
    rc, output = validate(out, version)
    assert rc == 0, output
    assert "WARN" not in output, output  # an unknown kind or apiVersion is only a warning to the validator
    per_index = version in PER_INDEX_VERSIONS
    assert all(("backoffLimitPerIndex" in d["spec"]) == per_index for d in docs if d["kind"] == "Job")


def test_the_validator_rejects_an_unknown_key_and_per_index_fields_on_an_old_version(plan_paths, tmp_path):
    job = next(d for d in generate(plan_paths["smoke"], tmp_path / "jobs.yaml") if d["kind"] == "Job")
    job["spec"]["template"]["spec"]["containers"][0]["gpu"] = 1
    (tmp_path / "unknown.yaml").write_text(yaml.safe_dump(job))
    rc, output = validate(tmp_path / "unknown.yaml", "1.33.0")
    assert rc != 0 and "'gpu' was unexpected" in output, output

    del job["spec"]["template"]["spec"]["containers"][0]["gpu"], job["spec"]["podFailurePolicy"]
    (tmp_path / "old.yaml").write_text(yaml.safe_dump(job))
    rc, output = validate(tmp_path / "old.yaml", "1.27.0")
    assert rc != 0 and "backoffLimitPerIndex" in output, output


# ---------------------------------------------------------------- what the validator does not check


@pytest.mark.parametrize("profile", ["full", "smoke"])
def test_enum_fields_limits_volumes_and_names(plan_paths, tmp_path, profile):
    plan_file = plans.read(plan_paths[profile])
    docs = generate(plan_paths[profile], tmp_path / "jobs.yaml")
    assert [d["kind"] for d in docs] == ["NetworkPolicy"] + ["ConfigMap", "Job"] * (len(docs) // 2)
    policy = docs[0]  # no traffic in or out of the run's pods
    assert policy["spec"] == {
        "podSelector": {"matchLabels": {"rosetta/run-id": policy["metadata"]["labels"]["rosetta/run-id"]}},
        "policyTypes": ["Ingress", "Egress"],
    }
    by_record = {f"/results/{c.id}.json": c for c in plan_file.cells}  # in the pod's own slot
    seen = []
    for job, cells in jobs_and_cells(docs):
        spec, pod = job["spec"], job["spec"]["template"]["spec"]
        (container,) = pod["containers"]
        assert spec["completionMode"] == "Indexed" and pod["restartPolicy"] == "Never"
        assert spec["completions"] == len(cells) and 1 <= spec["parallelism"] <= min(3, spec["completions"])
        assert spec["maxFailedIndexes"] <= spec["completions"] and spec["backoffLimitPerIndex"] == 1
        for rule in spec["podFailurePolicy"]["rules"]:
            assert rule["action"] in ("FailJob", "FailIndex", "Ignore", "Count")
            assert rule.get("onExitCodes", {}).get("operator", "In") in ("In", "NotIn")
            assert all(
                c["type"] == "DisruptionTarget" and c["status"] in ("True", "False", "Unknown")
                for c in rule.get("onPodConditions", [])
            )
        assert pod["activeDeadlineSeconds"] >= plan_file.plan.timeout_s
        assert container["command"][:2] == ["sh", "-c"]
        host = {"name": "ROSETTA_HOST", "valueFrom": {"fieldRef": {"fieldPath": "spec.nodeName"}}}
        assert container["env"][0] == host
        index = {
            "name": "ROSETTA_SLOT",
            "valueFrom": {
                "fieldRef": {"fieldPath": "metadata.annotations['batch.kubernetes.io/job-completion-index']"}
            },
        }
        assert container["env"][1] == index

        volumes = {v["name"]: v for v in pod["volumes"]}
        mounts = {m["mountPath"]: m for m in container["volumeMounts"]}
        assert volumes["data"]["persistentVolumeClaim"] == {"claimName": "rosetta-data", "readOnly": True}
        assert mounts["/data"] == {"name": "data", "mountPath": "/data", "readOnly": True}
        assert volumes["results"]["persistentVolumeClaim"] == {"claimName": "rosetta-results"}
        assert not mounts["/results"].get("readOnly") and mounts["/plan"]["readOnly"]
        # each pod reaches only its own slot of the claim, never the claim (other cells, other runs)
        group = int(job["metadata"]["name"].rsplit("-", 1)[1])
        assert mounts["/results"]["subPathExpr"] == f"{plan_file.run_id}/slots/k8s-{group}-$(ROSETTA_SLOT)"
        assert all("subPath" in m or "subPathExpr" in m for m in container["volumeMounts"] if m["name"] == "results")
        assert volumes["plan"]["configMap"]["name"] == job["metadata"]["name"]
        assert volumes["shm"]["emptyDir"]["medium"] == "Memory"
        assert (
            restricted_violations(
                pod, allowed_capabilities=CHAINER_EXCEPTION if "chainer" in container["image"] else ()
            )
            == []
        )
        resources = container["resources"]
        assert resources["requests"] == {"cpu": "8", "memory": "32Gi"}  # Guaranteed QoS
        assert {k: v for k, v in resources["limits"].items() if k != "nvidia.com/gpu"} == resources["requests"]

        # One image and one GPU count per Job, equal to each of its cells' own in the plan.
        planned = [by_record[args[args.index("--out") + 1]] for args in cells]
        limit = container.get("resources", {}).get("limits", {}).get("nvidia.com/gpu")
        for p in planned:
            assert container["image"] == "registry.example.org/" + p.image
            assert limit == (p.cell.gpus if p.cell.device == "gpu" else None)
        order = [plan_file.cells.index(p) for p in planned]
        assert order == sorted(order)  # plan order within the Job, and the Jobs in order of their first cell
        seen += planned

        name, labels = job["metadata"]["name"], job["metadata"]["labels"]
        assert DNS_LABEL.fullmatch(name) and len(name) <= 63, name
        assert labels["app.kubernetes.io/name"] == "rosetta" and job["spec"]["template"]["metadata"]["labels"] == labels
        assert LABEL_VALUE.fullmatch(labels["rosetta/run-id"]) and len(labels["rosetta/run-id"]) <= 63
    # Every cell of the plan exactly once, in plan order within each Job.
    assert sorted(p.id for p in seen) == sorted(c.id for c in plan_file.cells)
    firsts = [
        plan_file.cells.index(cells[0])
        for cells in [[by_record[a[a.index("--out") + 1]] for a in c] for _, c in jobs_and_cells(docs)]
    ]
    assert firsts == sorted(firsts)


CHAINER_EXCEPTION = ("SYS_PTRACE",)  # ChainerMN's MPICH (README: its namespace needs to admit it)
RESTRICTED_VOLUMES = {
    "configMap",
    "csi",
    "downwardAPI",
    "emptyDir",
    "ephemeral",
    "persistentVolumeClaim",
    "projected",
    "secret",
}


def restricted_violations(pod, allowed_capabilities=()):
    """What of `pod` breaks Pod Security "restricted" (kubernetes.io/docs/concepts/security/pod-security-standards),
    the checks a namespace labelled pod-security.kubernetes.io/enforce=restricted applies at admission."""
    found, pod_context = [], pod.get("securityContext", {})
    for key in ("hostNetwork", "hostPID", "hostIPC"):
        found += [key] if pod.get(key) else []
    found += [f"volume {v['name']}" for v in pod["volumes"] if not set(v) - {"name"} <= RESTRICTED_VOLUMES]
    if (pod_context.get("seccompProfile") or {}).get("type") not in ("RuntimeDefault", "Localhost"):
        found.append("seccompProfile")
    for c in pod["containers"]:
        context = c.get("securityContext", {})
        if context.get("runAsNonRoot", pod_context.get("runAsNonRoot")) is not True:
            found.append("runAsNonRoot")
        if context.get("runAsUser", pod_context.get("runAsUser")) == 0:
            found.append("runAsUser 0")
        if context.get("privileged") or context.get("allowPrivilegeEscalation") is not False:
            found.append("allowPrivilegeEscalation")
        capabilities = context.get("capabilities", {})
        if "ALL" not in capabilities.get("drop", []):
            found.append("capabilities.drop ALL")
        found += [
            f"capability {a}"
            for a in capabilities.get("add", [])
            if a != "NET_BIND_SERVICE" and a not in allowed_capabilities
        ]
    return found


def test_pods_are_restricted_but_for_chainers_one_capability(plan_paths, tmp_path):
    docs = generate(plan_paths["full"], tmp_path / "jobs.yaml", "--cpu", "4", "--memory", "16Gi")
    pods = [(d["spec"]["template"]["spec"]) for d in docs if d["kind"] == "Job"]
    for pod in pods:
        chainer = "/rosetta/chainer:" in pod["containers"][0]["image"]
        assert restricted_violations(pod) == (["capability SYS_PTRACE"] if chainer else [])
        assert pod["automountServiceAccountToken"] is False
        assert pod["containers"][0]["securityContext"]["readOnlyRootFilesystem"] is True
        assert pod["containers"][0]["resources"]["requests"] == {"cpu": "4", "memory": "16Gi"}
    assert any("/rosetta/chainer:" in p["containers"][0]["image"] for p in pods)


def test_pre_per_index_clusters_get_a_job_wide_backoff_limit(plan_paths, tmp_path):
    docs = generate(plan_paths["full"], tmp_path / "jobs.yaml", "--kube-version", "1.27")
    for job, cells in jobs_and_cells(docs):
        assert job["spec"]["backoffLimit"] == len(cells)
        assert not {"backoffLimitPerIndex", "maxFailedIndexes", "podFailurePolicy"} & set(job["spec"])


def test_names_stay_dns_labels_for_any_run_id():
    long_a, long_b = "x" * 80 + "-a", "x" * 80 + "-b"
    names = [k8s.dns_name(run_id, 12) for run_id in ("Full_2026.01.01", "--", long_a, long_b)]
    assert all(DNS_LABEL.fullmatch(n) and len(n) <= 63 for n in names), names
    assert names[2] != names[3]
    assert all(LABEL_VALUE.fullmatch(k8s.label_value(r)) for r in ("Smoke Run's #1", "__", long_a))


# ---------------------------------------------------------------- the pod's command picks the cell


def test_the_pod_command_runs_cell_i_with_its_exact_arguments(plan_paths, tmp_path):
    plan_file = plans.read(plan_paths["smoke"])
    (job,) = [d for d in generate(plan_paths["smoke"], tmp_path / "jobs.yaml") if d["kind"] == "Job"]
    (cells_map,) = [d for d in yaml.safe_load_all((tmp_path / "jobs.yaml").read_text()) if d["kind"] == "ConfigMap"]
    (tmp_path / "plan").mkdir()
    (tmp_path / "plan" / "cells").write_text(cells_map["data"]["cells"])
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    (bin_dir / "python").write_text("#!/bin/sh\nprintf '%s\\n' \"$@\"\n")
    (bin_dir / "python").chmod(0o755)
    command = job["spec"]["template"]["spec"]["containers"][0]["command"]
    run = RunSettings(plan_file.run_id, plan_file.plan.repeats, plan_file.plan.timeout_s, Path("/data"))
    for i, planned in enumerate(plan_file.cells):
        env = {
            **os.environ,
            "PATH": f"{bin_dir}:{os.environ['PATH']}",
            "JOB_COMPLETION_INDEX": str(i),
            "ROSETTA_PLAN_DIR": str(tmp_path / "plan"),
        }
        done = subprocess.run(command, env=env, capture_output=True, text=True, timeout=30)
        out = f"/results/{planned.id}.json"
        assert done.returncode == 0, done.stderr
        assert done.stdout.splitlines() == ["-m", "runners", *runner_args(planned.cell, out, run, "/data")]
        assert ["--out", out] == done.stdout.splitlines()[6:8]
    env["JOB_COMPLETION_INDEX"] = str(len(plan_file.cells))
    done = subprocess.run(command, env=env, capture_output=True, text=True, timeout=30)
    assert done.returncode == 2 and f"no cell at index {len(plan_file.cells)}" in done.stderr
    del env["JOB_COMPLETION_INDEX"]  # else $((… + 1)) would quietly pick the first cell
    done = subprocess.run(command, env=env, capture_output=True, text=True, timeout=30)
    assert done.returncode != 0 and "JOB_COMPLETION_INDEX" in done.stderr and not done.stdout


# ---------------------------------------------------------------- refused before anything is written


@pytest.mark.parametrize(
    "extra, message",
    [
        (["--kube-version", "1.23"], "validated for Kubernetes 1.25 and newer"),
        (["--kube-version", "1.24.9"], "validated for Kubernetes 1.25 and newer"),
        (["--kube-version", "latest"], "expected MAJOR.MINOR"),
        (["--kube-version", "1.3x"], "expected MAJOR.MINOR"),
        (["--parallelism", "0"], "at least 1 pod"),
        (["--image-prefix", "registry.example.org"], "end it with /"),
    ],
)
def test_bad_options_are_refused_and_nothing_is_written(plan_paths, tmp_path, capsys, extra, message):
    out = tmp_path / "jobs.yaml"
    assert k8s.main([str(plan_paths["smoke"]), *ARGS, "--out", str(out), *extra]) == 2
    assert message in capsys.readouterr().err and not out.exists()


def test_images_are_pinned_by_digest_where_one_is_known_and_pulled_fresh_by_tag_elsewhere(plan_paths, tmp_path, capsys):
    images = sorted({c.image for c in plans.read(plan_paths["full"]).cells})
    digest = "sha256:" + "ab" * 32
    (tmp_path / "digests.json").write_text(json.dumps({images[0]: digest}))
    docs = generate(plan_paths["full"], tmp_path / "jobs.yaml", "--digests", str(tmp_path / "digests.json"))
    pods = {
        c["image"]: c["imagePullPolicy"]
        for d in docs
        if d["kind"] == "Job"
        for c in d["spec"]["template"]["spec"]["containers"]
    }
    assert pods.pop(f"registry.example.org/{images[0]}@{digest}") == "IfNotPresent"
    assert pods and set(pods.values()) == {"Always"}  # a node's cached copy of a tag may be an old build
    code, said = validate(tmp_path / "jobs.yaml", "1.33.0")
    assert code == 0, said
    assert f"by tag only (no digest known; pulled on every start): {images[1]}" in capsys.readouterr().err


@pytest.mark.parametrize(
    "content, message",
    [
        ({"rosetta/nope:cpu": "sha256:" + "0" * 64}, "is not an image of this plan"),
        ("IMAGE", "is not a digest"),
        ("not json", "not a readable JSON file"),
        (["sha256:" + "0" * 64], "expected an object"),
    ],
)
def test_a_bad_digest_file_is_refused(plan_paths, tmp_path, capsys, content, message):
    image = plans.read(plan_paths["smoke"]).cells[0].image
    content = {image: "latest"} if content == "IMAGE" else content
    (tmp_path / "d.json").write_text(content if isinstance(content, str) else json.dumps(content))
    out = tmp_path / "jobs.yaml"
    assert k8s.main([str(plan_paths["smoke"]), *ARGS, "--digests", str(tmp_path / "d.json"), "--out", str(out)]) == 2
    assert message in capsys.readouterr().err and not out.exists()


def test_digests_come_from_the_local_engine_for_images_pushed_to_the_prefix(tmp_path):
    """What `docker image inspect` says of an image pushed to the registry (its RepoDigests); one missing image and
    another registry's digest are not taken."""
    digest = "sha256:" + "cd" * 32
    found = [
        {
            "RepoTags": ["reg.example/rosetta/pytorch:cpu"],
            "RepoDigests": [
                "other.example/rosetta/pytorch@sha256:" + "ef" * 32,
                f"reg.example/rosetta/pytorch@{digest}",
            ],
        },
        {"RepoTags": ["reg.example/rosetta/jax:cpu"], "RepoDigests": []},
    ]
    docker = tmp_path / "docker"
    docker.write_text(f"#!/bin/sh\ncat <<'EOF'\n{json.dumps(found)}\nEOF\nexit 1\n")
    docker.chmod(0o755)
    got = k8s.local_digests(
        "reg.example/", ["rosetta/pytorch:cpu", "rosetta/jax:cpu", "rosetta/mxnet:cpu"], str(docker)
    )
    assert got == {"rosetta/pytorch:cpu": digest}
    assert k8s.local_digests("", ["rosetta/pytorch:cpu"], str(docker)) == {}


def test_a_missing_plan_is_refused(tmp_path, capsys):
    assert k8s.main([str(tmp_path / "nope.json"), *ARGS, "--out", str(tmp_path / "jobs.yaml")]) == 2
    assert "not a readable plan file" in capsys.readouterr().err and not (tmp_path / "jobs.yaml").exists()


@pytest.mark.parametrize(
    "limit, message",
    [("MAX_COMPLETIONS", "at most 10 completions"), ("MAX_CELL_LIST_BYTES", "may hold at most 1000 bytes")],
)
def test_a_plan_bigger_than_a_job_takes_is_refused_with_what_to_change(
    plan_paths, tmp_path, capsys, monkeypatch, limit, message
):
    monkeypatch.setattr(k8s, limit, 10 if limit == "MAX_COMPLETIONS" else 1000)
    out = tmp_path / "jobs.yaml"
    assert k8s.main([str(plan_paths["full"]), *ARGS, "--out", str(out)]) == 2
    err = capsys.readouterr().err
    assert message in err and "split the profile" in err and not out.exists()


def test_the_real_limits_are_far_above_the_full_profile(plan_paths):
    plan_file = plans.read(plan_paths["full"])
    biggest = max(len(cells) for _, _, cells in k8s.groups(plan_file))
    assert biggest < k8s.MAX_COMPLETIONS
    assert max(len(k8s.cell_lines(plan_file, cells).encode()) for _, _, cells in k8s.groups(plan_file)) < 100_000


def test_stdout_gets_the_manifests_and_stderr_the_next_steps(plan_paths, capsys):
    assert k8s.main([str(plan_paths["smoke"]), *ARGS, "--namespace", "bench"]) == 0
    captured = capsys.readouterr()
    docs = list(yaml.safe_load_all(captured.out))
    assert {d["metadata"]["namespace"] for d in docs} == {"bench"}
    assert "kubectl apply -n bench -f -" in captured.err
    run_dir, mounted = shlex.quote("results/Smoke_Run.1"), shlex.quote("/mnt/results/Smoke_Run.1/slots")
    assert f"python -m scripts.results.merge {run_dir} {mounted} --plan {plan_paths['smoke']}" in captured.err


def test_cells_without_kernels_for_the_clusters_gpus_are_left_out_and_recorded_skipped(tmp_path):
    """The pre-flight a pod cannot run: with --gpu-arch sm_90, legacy images that stop at sm_86 or sm_70 with no PTX
    get no Job, and their skipped records (with the reason) wait in results/RUN_ID/cells/ for the merge."""
    plan_file = plans.make(load(), "full", "h100-run")
    plans.write(tmp_path / "plan.json", plan_file)
    out = subprocess.run(
        [
            sys.executable,
            "-m",
            "scripts.launch.k8s",
            str(tmp_path / "plan.json"),
            "--image-prefix",
            "r/",
            "--data-claim",
            "d",
            "--results-claim",
            "r",
            "--gpu-arch",
            "sm_90",
            "--out",
            str(tmp_path / "jobs.yaml"),
            "--results",
            str(tmp_path / "results"),
        ],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert out.returncode == 0, out.stderr
    images = {
        d["spec"]["template"]["spec"]["containers"][0]["image"]
        for d in yaml.safe_load_all((tmp_path / "jobs.yaml").read_text())
        if d["kind"] == "Job"
    }
    assert not any(i.startswith(("r/rosetta/mxnet:", "r/rosetta/caffe2:")) for i in images)
    assert any(i.startswith(("r/rosetta/pytorch:", "r/rosetta/cntk:")) for i in images)  # CNTK: JIT from its PTX
    skipped = [read_record(p) for p in (tmp_path / "results" / "h100-run" / "cells").glob("*.json")]
    unfit = {c.id for c in plan_file.cells if c.gpu_archs and not buildinfo.runs(c.gpu_archs, c.ptx, "sm_90")}
    assert unfit and {Cell(**r["cell"]).id for r in skipped} == unfit
    assert all(r["status"] == "skipped" and "sm_90" in r["reason"] for r in skipped)
    bad = subprocess.run(
        [
            sys.executable,
            "-m",
            "scripts.launch.k8s",
            str(tmp_path / "plan.json"),
            "--image-prefix",
            "",
            "--data-claim",
            "d",
            "--results-claim",
            "r",
            "--gpu-arch",
            "hopper",
        ],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert bad.returncode == 2 and "like sm_90" in bad.stderr


def test_the_merge_takes_from_each_slot_only_the_cell_planned_there(plan_paths, tmp_path):
    """A pod's record lands in RUN/slots/k8s-GROUP-INDEX/: the merge maps the slot back to its planned cell, and a
    record of another cell in that slot (a hostile pod claiming its neighbour's identity) is quarantined."""
    from scripts.results import merge, records
    from shared.record import make_record, write_record

    plan_file = plans.read(plan_paths["smoke"])
    slots = plans.slot_map(plan_file.cells)
    assert sorted(slots.values()) == sorted(c.id for c in plan_file.cells)
    (mine, victim), (other, _) = list(slots.items())[0], list(slots.items())[1]
    claim = tmp_path / "claim" / plan_file.run_id / "slots"
    cells = {c.id: c.cell for c in plan_file.cells}
    write_record(claim / mine / f"{victim}.json", make_record(vars(cells[victim]), "ok", run_id=plan_file.run_id))
    theirs = slots[other]
    write_record(claim / other / f"{victim}.json", make_record(vars(cells[victim]), "ok", run_id=plan_file.run_id))
    run_dir = tmp_path / "run"
    counts = merge.merge(run_dir, [claim], plan=plan_paths["smoke"])
    assert counts["new"] == 1 and counts["quarantined"] == 1
    [(source, reason)] = records.quarantined(run_dir)
    assert f"holds cell {victim}, but its file name" not in reason
    assert f"the Kubernetes slot {other} is the slot of {theirs}: one cell per slot" in reason
