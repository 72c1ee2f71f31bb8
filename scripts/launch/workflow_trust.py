"""Which workflow jobs can reach a self-hosted runner, and from which events: refuse any that a fork can start.

    python -m scripts.launch.workflow_trust [.github/workflows]     # exit 1 with one line per finding

GitHub's guidance for self-hosted runners on a public repository (docs/security.md): a pull request from a fork runs
the workflow files of its own merge commit, so a self-hosted runner must only ever be reached from events that only
people with write access can cause: `push` to named branches or tags (protect them), `workflow_dispatch`,
`schedule`, and `workflow_call` from such a workflow. This check reads every workflow, follows `uses:
./.github/workflows/X.yml` from caller to callee (a called workflow runs with its caller's event), and reports

- a job that may run on a self-hosted runner (a `self-hosted` label, any label that is not exactly one of GitHub's
  hosted images, a runner group, or an expression, which could name any of these) in a workflow started by any event
  but those four;
- a trigger this check does not know (KNOWN_EVENTS: the four above and the events a fork can cause), on any runner;
- a `push` trigger without `branches`/`tags` (any branch of anyone with write access, protected or not);
- `actions/checkout` with `clean: false` on a self-hosted runner (one job's files, a later job's code);
- `docker login` in a job that does not first point DOCKER_CONFIG at its own temporary folder (the token would land
  in the runner user's ~/.docker/config.json, where every later job reads it).

It reads only the repository's own files: what a fork adds in its own pull request is kept off the runners by the
runner group's settings (docs/security.md, "Runner groups"), which no file here can show.
"""

import argparse
import re
import sys
from collections.abc import Mapping, Sequence
from collections.abc import Set as AbstractSet
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from scripts.paths import ROOT

WORKFLOWS = ROOT / ".github" / "workflows"
# Events a workflow can be started by without write access to the repository: a fork's pull request and everything
# an outsider can do to an issue, a discussion, a review or a star; workflow_run follows any of these.
FORK_EVENTS = frozenset(
    {
        "pull_request",
        "pull_request_target",
        "pull_request_review",
        "pull_request_review_comment",
        "issue_comment",
        "issues",
        "discussion",
        "discussion_comment",
        "fork",
        "watch",
        "workflow_run",
        "merge_group",
        "check_run",
        "check_suite",
        "status",
        "deployment_status",
        "public",
        "repository_dispatch",
    }
)
# Events only someone with write access can cause (push to named branches or tags: protect them). The only ones
# judged safe for a self-hosted runner; with FORK_EVENTS, every event this check knows how to judge: a workflow
# started by any other (gollum, label, release, …) is a finding until its case is thought through and added here.
TRUSTED_EVENTS = frozenset({"push", "workflow_dispatch", "schedule", "workflow_call"})
KNOWN_EVENTS = FORK_EVENTS | TRUSTED_EVENTS
# GitHub-hosted runner images, by their exact labels (docs.github.com: "GitHub-hosted runners", standard and larger
# macOS runners); every other label is a self-hosted runner's, however much it looks like one of these
# (`ubuntu-h100-rosetta` is a label anyone may give a self-hosted runner).
HOSTED = frozenset(
    {
        *(f"ubuntu-{v}" for v in ("latest", "slim", "24.04", "22.04", "20.04", "24.04-arm", "22.04-arm")),
        *(f"windows-{v}" for v in ("latest", "2025", "2022", "2019", "11-arm")),
        *(f"macos-{v}{size}" for v in ("latest", "26", "15", "14", "13") for size in ("", "-large", "-xlarge")),
        "macos-15-intel",
    }
)


class WorkflowError(Exception):
    """A workflow file that cannot be read as one; the message names it."""


@dataclass(frozen=True)
class Finding:
    workflow: str
    job: str
    why: str

    def __str__(self) -> str:
        return f"{self.workflow}: job {self.job}: {self.why}"


def read(path: str | Path) -> dict[Any, Any]:
    try:
        doc = yaml.safe_load(Path(path).read_text())
    except (OSError, yaml.YAMLError) as e:
        raise WorkflowError(f"{path}: not a readable workflow ({e})") from e
    if not isinstance(doc, dict):
        raise WorkflowError(f"{path}: not a workflow (a mapping with `on` and `jobs`)")
    return doc


def triggers(doc: Mapping[Any, Any]) -> dict[Any, Any]:
    """{event: its configuration (or None)} of a workflow's `on` (YAML 1.1 reads a bare `on` as True)."""
    on = doc.get("on", doc.get(True))
    if isinstance(on, str):
        return {on: None}
    if isinstance(on, list):
        return {event: None for event in on}
    return dict(on or {})


def may_be_self_hosted(runs_on: Any) -> bool:
    """True unless `runs_on` names only GitHub-hosted images (a literal string or list of them)."""
    if isinstance(runs_on, dict):  # {group: …, labels: …}: a runner group is self-hosted or larger-runner
        return True
    labels = runs_on if isinstance(runs_on, list) else [runs_on]
    return not labels or any(not isinstance(label, str) or "${{" in label or label not in HOSTED for label in labels)


def local_callee(uses: str | None) -> str | None:
    """The workflow file name a job's `uses: ./.github/workflows/X.yml` calls, else None."""
    match = re.fullmatch(r"\./\.github/workflows/([^/@]+\.ya?ml)", uses or "")
    return match and match.group(1)


def reachable_events(docs: Mapping[str, Mapping[Any, Any]]) -> dict[str, set[Any]]:
    """{workflow file name: the events that can start it}, a called workflow's being its callers' (a fixed point)."""
    events = {name: set(triggers(doc)) - {"workflow_call"} for name, doc in docs.items()}
    changed = True
    while changed:
        changed = False
        for name, doc in docs.items():
            for job in (doc.get("jobs") or {}).values():
                callee = local_callee(job.get("uses") if isinstance(job, dict) else None)
                if callee in events and not events[name] <= events[callee]:
                    events[callee] |= events[name]
                    changed = True
    return events


def job_findings(name: str, job_id: str, job: Mapping[str, Any], events: AbstractSet[str]) -> list[Finding]:
    """What is wrong with one job that may run on a self-hosted runner."""
    found = []
    forks = sorted(map(str, events - TRUSTED_EVENTS))
    if forks:
        found.append(
            Finding(
                name,
                job_id,
                f"may run on a self-hosted runner ({job.get('runs-on')!r}) and is "
                f"started by {', '.join(forks)}, which a fork can cause: run it on a "
                "GitHub-hosted runner, or trigger it only by push to protected branches "
                "or tags, workflow_dispatch or schedule",
            )
        )
    steps = [s for s in job.get("steps") or [] if isinstance(s, dict)]
    for step in steps:
        if str(step.get("uses", "")).startswith("actions/checkout@") and (step.get("with") or {}).get("clean") is False:
            found.append(
                Finding(
                    name,
                    job_id,
                    "checks out with `clean: false` on a self-hosted runner: files an "
                    "earlier job left (a framework's code run as the runner user) would "
                    "reach this one; let checkout clean, and use ephemeral runners",
                )
            )
    scoped = False
    for step in steps:
        text = str(step.get("run", ""))
        if "DOCKER_CONFIG" in (step.get("env") or {}) or re.search(r"DOCKER_CONFIG=\S*RUNNER_TEMP", text):
            scoped = True
        if re.search(r"\bdocker\s+login\b", text) and not scoped:
            found.append(
                Finding(
                    name,
                    job_id,
                    "runs `docker login` without a job-scoped DOCKER_CONFIG (set it to a "
                    "folder under $RUNNER_TEMP first): the token would stay in the runner "
                    "user's ~/.docker/config.json for every later job",
                )
            )
    return found


def findings(folder: str | Path = WORKFLOWS) -> list[Finding]:
    """Every Finding over the workflows in `folder`, by file and job."""
    docs = {path.name: read(path) for path in sorted(Path(folder).glob("*.y*ml"))}
    if not docs:
        raise WorkflowError(f"{folder}: no workflow files (*.yml): pass the .github/workflows folder")
    events = reachable_events(docs)
    found = []
    for name, doc in docs.items():
        unknown = sorted(map(str, set(triggers(doc)) - KNOWN_EVENTS))
        if unknown:
            found.append(
                Finding(
                    name,
                    "*",
                    f"started by {', '.join(unknown)}, an event this check does not know who can cause: use "
                    "push to named branches or tags, workflow_dispatch, schedule or workflow_call (or judge the "
                    "event and add it to scripts/launch/workflow_trust.py)",
                )
            )
        push = triggers(doc).get("push", False)
        if push is not False and not (isinstance(push, dict) and (push.get("branches") or push.get("tags"))):
            found.append(
                Finding(
                    name,
                    "*",
                    "`push` without `branches` or `tags`: any branch anyone with write "
                    "access pushes starts it; name the protected branches or tags",
                )
            )
        for job_id, job in (doc.get("jobs") or {}).items():
            if isinstance(job, dict) and "runs-on" in job and may_be_self_hosted(job["runs-on"]):
                found += job_findings(name, job_id, job, events[name])
    return found


def main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m scripts.launch.workflow_trust", description=__doc__.split("\n")[0])
    ap.add_argument("folder", nargs="?", type=Path, default=WORKFLOWS, help="the workflows (default: %(default)s)")
    args = ap.parse_args(argv)
    try:
        found = findings(args.folder)
    except WorkflowError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    for finding in found:
        print(f"ERROR {finding}")
    print(
        f"{args.folder}: {len(found)} finding(s)" + ("" if found else ": no fork's event reaches a self-hosted runner")
    )
    return 1 if found else 0


if __name__ == "__main__":
    sys.exit(main())
