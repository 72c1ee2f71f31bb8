"""Kubernetes Indexed Jobs from a plan file: one completion per cell, JOB_COMPLETION_INDEX picking the cell.

    python -m scripts.plan --profile full --out plan.json
    python -m scripts.launch.k8s plan.json --image-prefix registry.example.org/ --data-claim rosetta-data \\
        --results-claim rosetta-results --parallelism 4 --kube-version 1.33 --out jobs.yaml
    kubectl apply -f jobs.yaml

An Indexed Job has one pod template, so one image and one GPU count: the plan's cells are grouped by (image, GPUs)
in plan order, and each group becomes a ConfigMap (one line per cell: the runner's arguments, shell-quoted) and a Job
with one completion per line. The pod runs `python -m runners` in the cell's image with the data claim read-only at
/data and the record written to its own slot of the results claim (RUN_ID/slots/k8s-GROUP-INDEX/ID.json, mounted
with subPathExpr: a pod reaches no other record); `scripts.results.merge` gathers them and checks each slot's cell.
The plan is never expanded again, and nothing is written when the plan does not fit (exit status 2, with what to
change). A pod killed at its deadline writes no record: the merged report lists that cell as missing.

Images are pinned by digest where one is known (`--digests FILE`: {"rosetta/FAMILY:VARIANT": "sha256:…"}, or the
local engine's RepoDigests of an image pushed to or pulled from the prefix's registry), so every node runs the same
bytes; an image known only by its tag is pulled on every start (imagePullPolicy Always), never taken stale from a
node's cache, and the next steps name it.
"""

import argparse
import hashlib
import json
import re
import shlex
import shutil
import subprocess
import sys
from collections.abc import Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import yaml

from scripts.launch import preflight
from scripts.launch.executors import RunSettings, runner_args
from scripts.paths import ROOT
from scripts.plan import planfile as plans
from scripts.plan.matrix import MatrixError, load
from shared.record import git_commit, make_record, write_atomic, write_record

OLDEST = (1, 25)  # Indexed Jobs are GA from 1.24 (KEP-2214), but the tests' schemas start at 1.25
PER_INDEX = (1, 29)  # backoffLimitPerIndex: beta and on by default from 1.29, GA in 1.33 (KEP-3850)
MAX_COMPLETIONS = 100_000  # the API server's cap on completions of a Job with backoffLimitPerIndex
MAX_CELL_LIST_BYTES = 1_000_000  # a ConfigMap holds at most 1 MiB (etcd's object limit), less its metadata
PULL_MARGIN_S = 600  # the pod deadline counts from the pod's start on its node, so it includes the image pull
TTL_S = 7 * 24 * 3600  # finished Jobs (and their pods' logs) go after a week; the records stay on the claim
CAPABILITIES = {"chainer": ["SYS_PTRACE"]}  # as compose.yaml: ChainerMN's MPICH needs pidfd_getfd between processes
# (the one exception to Pod Security "restricted": Chainer's Jobs need a namespace that admits SYS_PTRACE; README)
USER = 1000  # the images' user (docker/Dockerfile: USER 1000:1000)
LABEL = "rosetta/run-id"

# The pod's command: line JOB_COMPLETION_INDEX+1 of the cell list holds the runner's arguments, shell-quoted (shlex),
# so `eval set --` gives back exactly the list scripts.launch.executors.runner_args made. Exit 2 (no such line) is a
# configuration error that a retry cannot fix; the pod failure policy fails that index at once.
SELECT = """\
: "${JOB_COMPLETION_INDEX:?is not set: run this as a pod of an Indexed Job}"
cells="${ROSETTA_PLAN_DIR:-/plan}/cells"
line=$(sed -n "$((JOB_COMPLETION_INDEX + 1))p" "$cells")
[ -n "$line" ] || { echo "no cell at index $JOB_COMPLETION_INDEX in $cells" >&2; exit 2; }
eval "set -- $line"
exec python -m runners "$@"
"""


class K8sError(Exception):
    """A plan or option this backend cannot take; the message says what to change."""


@dataclass(frozen=True)
class Target:
    """Where the Jobs run: the cluster's version, the images' registry, the two claims."""

    image_prefix: str  # REGISTRY/ before rosetta/FAMILY:VARIANT; empty for images already on the nodes
    data_claim: str  # PVC holding synthetic/ and real/, mounted read-only
    results_claim: str  # PVC the records go to; ReadWriteMany, since pods on many nodes write it at once
    namespace: str | None = None
    parallelism: int = 1  # pods of one Job at a time; the Jobs (one per group) run side by side
    kube: tuple = (1, 33)
    git_commit: str = ""  # the checkout's commit for the records, as compose passes it; "" when unknown
    cpu: str = "8"  # each pod's CPU and memory, requested and limited alike (Guaranteed QoS): a cell owns its
    memory: str = "32Gi"  # cores, so timings are not shared with a neighbour, and is not the first pod evicted
    digests: dict = field(default_factory=dict)  # rosetta/FAMILY:VARIANT → sha256:… (image_ref)


def kube_version(text: str) -> tuple[int, int]:
    """'1.33', '1.33.2' or 'v1.33' -> (1, 33); refused when malformed or older than the oldest validated."""
    match = re.fullmatch(r"v?(\d+)\.(\d+)(\.\d+)?", text.strip())
    if not match:
        raise K8sError(f"--kube-version {text!r}: expected MAJOR.MINOR such as 1.33 (`kubectl version` prints it)")
    version = (int(match[1]), int(match[2]))
    if version < OLDEST:
        raise K8sError(
            f"--kube-version {text}: these manifests are validated for Kubernetes {OLDEST[0]}.{OLDEST[1]} "
            f"and newer (Indexed Jobs need 1.24 at least); upgrade the cluster, or run the plan's cells "
            f"with `python -m scripts.cell PLAN --index I` on hosts of your own"
        )
    return version


def dns_name(run_id: str, index: int | str) -> str:
    """A DNS-1123 label (lowercase, at most 63 characters) for group `index` of run `run_id`; a run id too long to
    keep whole is cut and given a hash of itself, so two long run ids still get different names."""
    base, suffix = "rosetta-" + re.sub(r"[^a-z0-9]+", "-", run_id.lower()).strip("-"), f"-{index}"
    if len(base) + len(suffix) > 63:
        base = base[: 63 - len(suffix) - 7].rstrip("-") + "-" + hashlib.sha256(run_id.encode()).hexdigest()[:6]
    return base + suffix


def label_value(run_id: str) -> str:
    """The run id as a label value: at most 63 of [A-Za-z0-9-_.], starting and ending alphanumeric."""
    return re.sub(r"[^A-Za-z0-9._-]+", "-", run_id)[:63].strip("-._") or "run"


# Each pod mounts only its own slot of the results claim (subPathExpr), RUN_ID/slots/k8s-GROUP-INDEX, INDEX being its
# completion index: no pod can reach another cell's or another run's records, or nest a record under an attempt
# number. The merge reads the slot's name back (plans.slot_map) and accepts only the record of the cell planned there.
SLOT_ENV = "ROSETTA_SLOT"
INDEX_ANNOTATION = "batch.kubernetes.io/job-completion-index"


def groups(plan_file: plans.PlanFile) -> list[tuple[str, int, list[plans.PlannedCell]]]:
    """[(image, GPUs, [PlannedCell])] in plan order; GPUs is 0 for CPU cells, whose `gpus` counts processes."""
    return plans.groups_of(plan_file.cells)


def cell_lines(plan_file: plans.PlanFile, cells: Iterable[plans.PlannedCell]) -> str:
    """One line per cell: the runner contract's arguments as the pod sees them (/data, /results), shell-quoted."""
    p = plan_file.plan
    run = RunSettings(plan_file.run_id, p.repeats, p.timeout_s, Path("/data"))
    out = Path("/results")  # the pod's own slot (pod_spec): its record is the only file it writes there
    return "".join(shlex.join(runner_args(c.cell, out / f"{c.id}.json", run, "/data")) + "\n" for c in cells)


def check_fits(plan_file: plans.PlanFile, grouped: Sequence[tuple[str, int, Sequence[plans.PlannedCell]]]) -> None:
    if not grouped:
        raise K8sError(f"the plan of run {plan_file.run_id} has no cells; nothing to submit")
    for index, (image, gpus, cells) in enumerate(grouped):
        size = len(cell_lines(plan_file, cells).encode())
        what = f"group {index} ({image}, {f'{gpus} GPU' if gpus else 'CPU'} each) has {len(cells)} cells"
        if len(cells) > MAX_COMPLETIONS:
            raise K8sError(
                f"{what}; a Job takes at most {MAX_COMPLETIONS} completions: split the profile (fewer "
                f"frameworks, variants, precisions or GPU counts per run)"
            )
        if size > MAX_CELL_LIST_BYTES:
            raise K8sError(
                f"{what}, whose cell list is {size} bytes; its ConfigMap may hold at most "
                f"{MAX_CELL_LIST_BYTES} bytes: split the profile (fewer frameworks, variants or precisions "
                f"per run)"
            )


def metadata(name: str, target: Target, run_label: str) -> dict[str, Any]:
    meta = {"name": name, "labels": {"app.kubernetes.io/name": "rosetta", LABEL: run_label}}
    if target.namespace:
        meta["namespace"] = target.namespace
    return meta


DIGEST = re.compile(r"sha256:[0-9a-f]{64}")


def image_ref(target: Target, image: str) -> tuple[str, str]:
    """(the pod's image, its pull policy): PREFIXrosetta/FAMILY:VARIANT@sha256:… where the digest is known, taken
    from the node's cache if there; else the tag, pulled on every start from a registry (a node's copy of a tag may
    be an old build), or, with no registry, the node's own image."""
    digest = target.digests.get(image)
    if digest:
        return f"{target.image_prefix}{image}@{digest}", "IfNotPresent"
    return target.image_prefix + image, "Always" if target.image_prefix else "IfNotPresent"


def read_digests(path: str | Path, images: Collection[str]) -> dict[str, str]:
    """{image: digest} from a JSON file; K8sError for anything but digests of the plan's images."""
    try:
        doc = json.loads(Path(path).read_text())
    except (OSError, ValueError) as e:
        raise K8sError(f"--digests {path}: not a readable JSON file ({e})") from e
    if not isinstance(doc, dict):
        raise K8sError(f'--digests {path}: expected an object {{"rosetta/FAMILY:VARIANT": "sha256:…"}}')
    for image, digest in doc.items():
        if image not in images:
            raise K8sError(f"--digests {path}: {image!r} is not an image of this plan ({', '.join(sorted(images))})")
        if not isinstance(digest, str) or not DIGEST.fullmatch(digest):
            raise K8sError(f"--digests {path}: {image}: {digest!r} is not a digest (sha256: and 64 hex digits)")
    return doc


def local_digests(prefix: str, images: Collection[str], docker: str | None = None) -> dict[str, str]:
    """{image: digest} of the plan's images the local Docker engine knows by a RepoDigest under `prefix` (it pushed
    or pulled them there); empty without a prefix or an engine. One `docker image inspect` for all of them."""
    docker = docker or shutil.which("docker")
    if not prefix or not docker or not images:
        return {}
    try:  # exit status 1 when some are missing; stdout still lists the ones found
        out = subprocess.run(
            [docker, "image", "inspect", *(prefix + image for image in images)],
            capture_output=True,
            text=True,
            timeout=60,
        )
        found = json.loads(out.stdout or "[]")
    except (OSError, ValueError, subprocess.TimeoutExpired):
        return {}
    digests: dict[str, str] = {}
    for entry in found if isinstance(found, list) else []:
        for tag in entry.get("RepoTags") or []:
            image = tag[len(prefix) :] if tag.startswith(prefix) else None
            repository = tag.rsplit(":", 1)[0]
            for repo_digest in entry.get("RepoDigests") or []:
                name, _, digest = repo_digest.partition("@")
                if image is not None and image in images and name == repository and DIGEST.fullmatch(digest):
                    digests[image] = digest
    return digests


def pod_spec(
    name: str, target: Target, image: str, gpus: int, timeout_s: float, slot_prefix: str = "slot"
) -> dict[str, Any]:
    """One cell's pod, hardened as Pod Security "restricted" asks: not root, no privilege escalation, every
    capability dropped (Chainer's SYS_PTRACE is added back), the runtime's seccomp profile, a read-only root file
    system (HOME=/tmp is an emptyDir), no service-account token; CPU and memory requested = limited."""
    env = [
        {"name": "ROSETTA_HOST", "valueFrom": {"fieldRef": {"fieldPath": "spec.nodeName"}}},  # the record's host
        {"name": SLOT_ENV, "valueFrom": {"fieldRef": {"fieldPath": f"metadata.annotations['{INDEX_ANNOTATION}']"}}},
    ]
    if target.git_commit:
        env.append({"name": "ROSETTA_GIT_COMMIT", "value": target.git_commit})
    family = image.rsplit("/", 1)[-1].split(":")[0]
    limits = {"cpu": target.cpu, "memory": target.memory, **({"nvidia.com/gpu": gpus} if gpus else {})}
    reference, pull = image_ref(target, image)
    container = {
        "name": "runner",
        "image": reference,
        "imagePullPolicy": pull,
        "command": ["sh", "-c", SELECT],  # the image's ENTRYPOINT is `python -m runners`; its WORKDIR is /app
        "env": env,
        "resources": {"requests": {k: v for k, v in limits.items() if k != "nvidia.com/gpu"}, "limits": limits},
        "securityContext": {
            "allowPrivilegeEscalation": False,
            "readOnlyRootFilesystem": True,
            "capabilities": {"drop": ["ALL"], **({"add": CAPABILITIES[family]} if family in CAPABILITIES else {})},
        },
        "volumeMounts": [
            {"name": "data", "mountPath": "/data", "readOnly": True},
            # only this pod's slot of the claim: RUN/slots/k8s-GROUP-INDEX
            {"name": "results", "mountPath": "/results", "subPathExpr": f"{slot_prefix}-$({SLOT_ENV})"},
            {"name": "plan", "mountPath": "/plan", "readOnly": True},
            {"name": "shm", "mountPath": "/dev/shm"},
            {"name": "tmp", "mountPath": "/tmp"},
        ],
    }
    return {
        "restartPolicy": "Never",
        "activeDeadlineSeconds": int(timeout_s) + PULL_MARGIN_S,
        "automountServiceAccountToken": False,
        "securityContext": {
            "runAsNonRoot": True,
            "runAsUser": USER,
            "runAsGroup": USER,
            "fsGroup": USER,
            "seccompProfile": {"type": "RuntimeDefault"},
        },
        "containers": [container],
        "volumes": [
            {"name": "data", "persistentVolumeClaim": {"claimName": target.data_claim, "readOnly": True}},
            {"name": "results", "persistentVolumeClaim": {"claimName": target.results_claim}},
            {"name": "plan", "configMap": {"name": name}},
            # Data-loader workers pass batches through /dev/shm; the container default (64 MB) is too small.
            {"name": "shm", "emptyDir": {"medium": "Memory", "sizeLimit": "2Gi"}},
            # HOME: Keras' config, compiled kernels; the root file system is read-only.
            {"name": "tmp", "emptyDir": {"sizeLimit": "8Gi"}},
        ],
    }


def network_policy(name: str, target: Target, run_label: str) -> dict[str, Any]:
    """No traffic in or out of the run's pods: a benchmark reads its data from the claim and needs no network."""
    return {
        "apiVersion": "networking.k8s.io/v1",
        "kind": "NetworkPolicy",
        "metadata": metadata(name, target, run_label),
        "spec": {"podSelector": {"matchLabels": {LABEL: run_label}}, "policyTypes": ["Ingress", "Egress"]},
    }


def job_spec(
    name: str,
    target: Target,
    labels: Mapping[str, str],
    image: str,
    gpus: int,
    cells: Sequence[plans.PlannedCell],
    timeout_s: float,
    slot_prefix: str = "slot",
) -> dict[str, Any]:
    n = len(cells)
    spec = {"completions": n, "parallelism": min(target.parallelism, n), "completionMode": "Indexed"}
    if target.kube >= PER_INDEX:
        # One retry per cell (a failed cell's record says why; a second try outlives a flaky GPU or NCCL start), and
        # a failed cell never stops the others (the matrix goes on), so every index may fail. An evicted or
        # preempted pod is not the cell's fault and does not count. Retrying cannot help after exit 2 (a usage
        # error) or a kill (137, 143: the deadline or the memory limit, which the same cell would hit again).
        spec.update(
            backoffLimitPerIndex=1,
            maxFailedIndexes=n,
            podFailurePolicy={
                "rules": [
                    {"action": "Ignore", "onPodConditions": [{"type": "DisruptionTarget", "status": "True"}]},
                    {
                        "action": "FailIndex",
                        "onExitCodes": {"containerName": "runner", "operator": "In", "values": [2, 137, 143]},
                    },
                ]
            },
        )
    else:
        spec["backoffLimit"] = n  # counted over the whole Job: about one retry per cell before the Job gives up
    spec["ttlSecondsAfterFinished"] = TTL_S
    spec["template"] = {
        "metadata": {"labels": labels},
        "spec": pod_spec(name, target, image, gpus, timeout_s, slot_prefix),
    }
    return spec


def manifests(plan_file: plans.PlanFile, target: Target) -> list[dict[str, Any]]:
    """The ConfigMap and Job of every group, in plan order; a K8sError when the plan does not fit, a PlanError when
    its ids are not of the safe alphabet (each becomes a ConfigMap line the pod's shell reads, a label, a name)."""
    plans.check_ids(plan_file)
    if target.parallelism < 1:
        raise K8sError(f"--parallelism {target.parallelism}: at least 1 pod per Job must run")
    grouped = groups(plan_file)
    check_fits(plan_file, grouped)
    run_label, docs = label_value(plan_file.run_id), []
    for index, (image, gpus, cells) in enumerate(grouped):
        name = dns_name(plan_file.run_id, index)
        labels = metadata(name, target, run_label)["labels"]
        docs += [
            {
                "apiVersion": "v1",
                "kind": "ConfigMap",
                "metadata": metadata(name, target, run_label),
                "data": {"cells": cell_lines(plan_file, cells)},
            },
            {
                "apiVersion": "batch/v1",
                "kind": "Job",
                "metadata": metadata(name, target, run_label),
                "spec": job_spec(
                    name,
                    target,
                    labels,
                    image,
                    gpus,
                    cells,
                    plan_file.plan.timeout_s,
                    f"{plan_file.run_id}/slots/k8s-{index}",
                ),
            },
        ]
    return [network_policy(dns_name(plan_file.run_id, "isolated"), target, run_label)] + docs


class BlockDumper(yaml.SafeDumper):
    """SafeDumper that writes multi-line strings (the pod's script, the cell lists) as literal blocks people can
    read, instead of one quoted line of \\n escapes. No anchors: each document stands alone for kubectl."""

    def ignore_aliases(self, data: Any) -> bool:
        return True


BlockDumper.add_representer(
    str,
    lambda dumper, text: dumper.represent_scalar("tag:yaml.org,2002:str", text, style="|" if "\n" in text else None),
)


def to_yaml(docs: Iterable[Mapping[str, Any]]) -> str:
    return yaml.dump_all(docs, Dumper=BlockDumper, sort_keys=False, width=120)


def next_steps(
    plan_path: str | Path,
    plan_file: plans.PlanFile,
    target: Target,
    docs: Iterable[Mapping[str, Any]],
    out: Path | None,
) -> str:
    namespace = f" -n {target.namespace}" if target.namespace else ""
    jobs = [d for d in docs if d["kind"] == "Job"]
    lines = [
        f"{out or 'standard output'}: {len(jobs)} Indexed Jobs for run {plan_file.run_id} "
        f"({len(plan_file.cells)} cells, Kubernetes {target.kube[0]}.{target.kube[1]}):"
    ]
    for job in jobs:
        limits = job["spec"]["template"]["spec"]["containers"][0].get("resources", {}).get("limits", {})
        gpus = limits.get("nvidia.com/gpu")
        lines.append(
            f"  {job['metadata']['name']}  {job['spec']['template']['spec']['containers'][0]['image']}  "
            f"{job['spec']['completions']} cells, {f'{gpus} GPU' if gpus else 'CPU'} each"
        )
    by_tag = sorted({c.image for c in plan_file.cells} - set(target.digests))
    if by_tag:
        lines.append(
            f"by tag only (no digest known; pulled on every start): {', '.join(by_tag)} — pin them with "
            "--digests FILE, or push them from this host first"
        )
    lines += [
        f"apply:  kubectl apply{namespace} -f {out or '- (pipe the output into it)'}",
        f"watch:  kubectl get jobs{namespace} -l {LABEL}={label_value(plan_file.run_id)}",
        f"merge:  mount the claim {target.results_claim} on a host (here at /mnt/results), then",
        f"        python -m scripts.results.merge {shlex.quote(f'results/{plan_file.run_id}')} "
        f"{shlex.quote(f'/mnt/results/{plan_file.run_id}/slots')} --plan {shlex.quote(str(plan_path))}",
        "A pod killed at its deadline leaves no record; the report lists its cell as missing.",
    ]
    return "\n".join(lines)


def leave_out_unfit(plan_file: plans.PlanFile, archs: Iterable[str], results: str | Path) -> plans.PlanFile:
    """The pre-flight on one host, done here for the cluster: cells whose image has no kernels for `archs` (the
    cluster's GPU architectures, e.g. sm_90) leave the plan, and their `skipped` records, with the reason, go to
    RESULTS/RUN_ID/cells/, the folder the merge writes into, so the report shows them. Returns the plan that runs."""
    gpus = [preflight.HostGpu("*", "the cluster's GPUs (--gpu-arch)", f"{a[3:-1]}.{a[-1]}") for a in archs]
    unfit = {c.id: preflight.reason(c.cell, c.image, c.gpu_archs, gpus, c.ptx, c.cuda) for c in plan_file.cells}
    for planned in plan_file.cells:
        if unfit[planned.id]:
            write_record(
                Path(results) / plan_file.run_id / "cells" / f"{planned.id}.json",
                make_record(vars(planned.cell), "skipped", run_id=plan_file.run_id, reason=unfit[planned.id]),
            )
    kept = tuple(c for c in plan_file.cells if not unfit[c.id])
    return replace(plan_file, cells=kept, plan=replace(plan_file.plan, cells=tuple(c.cell for c in kept)))


def main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m scripts.launch.k8s", description=__doc__.split("\n")[0])
    ap.add_argument("plan", type=Path, help="the plan file (python -m scripts.plan)")
    ap.add_argument(
        "--image-prefix",
        required=True,
        help="registry path before rosetta/FAMILY:VARIANT, e.g. registry.example.org/ ('' for none)",
    )
    ap.add_argument("--data-claim", required=True, help="PVC holding synthetic/ and real/ (mounted read-only)")
    ap.add_argument("--results-claim", required=True, help="ReadWriteMany PVC the records are written to")
    ap.add_argument("--namespace", help="namespace of the Jobs and ConfigMaps (default: kubectl's current one)")
    ap.add_argument("--parallelism", type=int, default=1, help="pods of one Job at a time (default 1)")
    ap.add_argument("--kube-version", default="1.33", help="the cluster's MAJOR.MINOR (default 1.33; oldest 1.25)")
    ap.add_argument("--cpu", default=Target.cpu, help=f"CPUs per pod, requested = limit (default {Target.cpu})")
    ap.add_argument(
        "--memory", default=Target.memory, help=f"memory per pod, requested = limit (default {Target.memory})"
    )
    ap.add_argument(
        "--digests",
        type=Path,
        help='JSON {"rosetta/FAMILY:VARIANT": "sha256:…"}: pin those images by '
        "digest (default: what the local Docker engine knows of the prefix's registry)",
    )
    ap.add_argument("--out", type=Path, help="the manifests' file (default: stdout)")
    ap.add_argument(
        "--gpu-arch",
        action="append",
        default=[],
        metavar="sm_XY",
        help="the cluster's GPU architecture (repeatable): cells whose image has no kernels for it are "
        "left out and recorded `skipped` under --results",
    )
    ap.add_argument("--results", type=Path, default=ROOT / "results", help="where those records go (default results/)")
    args = ap.parse_args(argv)
    try:
        if args.image_prefix and not args.image_prefix.endswith("/"):
            raise K8sError(
                f"--image-prefix {args.image_prefix}: end it with / (images are "
                f"PREFIXrosetta/FAMILY:VARIANT, e.g. {args.image_prefix}/rosetta/pytorch:cu130)"
            )
        target = Target(
            args.image_prefix,
            args.data_claim,
            args.results_claim,
            args.namespace,
            args.parallelism,
            kube_version(args.kube_version),
            git_commit(ROOT) or "",
            args.cpu,
            args.memory,
        )
        bad = [a for a in args.gpu_arch if not re.fullmatch(r"sm_\d{2,3}", a)]
        if bad:
            raise K8sError(f"--gpu-arch {bad[0]}: expected an architecture like sm_90 (compute capability 9.0)")
        plan_file = plans.check_against(plans.read(args.plan), load(), str(args.plan))
        images = {c.image for c in plan_file.cells}
        digests = (
            read_digests(args.digests, images) if args.digests else local_digests(args.image_prefix, sorted(images))
        )
        target = replace(target, digests=digests)
        planned = len(plan_file.cells)
        plan_file = leave_out_unfit(plan_file, args.gpu_arch, args.results) if args.gpu_arch else plan_file
        if len(plan_file.cells) < planned:
            print(
                f"pre-flight: {planned - len(plan_file.cells)} cells have no kernels for {', '.join(args.gpu_arch)}; "
                f"recorded `skipped` in {args.results / plan_file.run_id / 'cells'}",
                file=sys.stderr,
            )
        docs = manifests(plan_file, target)
    except (plans.PlanError, K8sError, MatrixError) as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    if args.out:
        write_atomic(args.out, to_yaml(docs))
    else:
        sys.stdout.write(to_yaml(docs))
    print(next_steps(args.plan, plan_file, target, docs, args.out), file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
