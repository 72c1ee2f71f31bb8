"""The Rosetta index: concepts (define the network, load the canonical weights, choose the device, …) found in every
runner by `# rosetta: CONCEPT` comment lines, so that the site can show one concept of every framework side by side.

A marker sits directly above the lines that do the concept, in Python, R and Julia alike:

    # rosetta: optimizer
    optimizer = torch.optim.SGD(model.parameters(), lr=p["lr"], momentum=p["momentum"])

The concept's cell is the lines after the marker up to the first blank line, a line indented less than the marker, or
the next marker at the same or a lower indentation, `# rosetta: end` included (a deeper marker is nested: it is left out
of the cell, which goes on). A concept lives in the task's module or, where the package shares it between tasks (a
`sync` barrier, device selection), in one of the package's other files (`__init__.py`, `keras.R`, `common.jl`); the task
module's markers come first. The registry below says which concepts each task's runners must mark; tests/test_site.py
fails when a runner lacks one or names one that does not exist.
"""

import re
import textwrap
from collections import OrderedDict
from collections.abc import Collection
from pathlib import Path

from shared.params import TASKS

MARKER = re.compile(r"^(\s*)#\s*rosetta:\s*(.*?)\s*$")
END = "end"
SOURCES = (".py", ".R", ".jl")

CONCEPTS = OrderedDict(
    [
        ("model", "define the network"),
        ("init", "load the canonical weights, so that every framework starts from the same numbers"),
        ("device", "choose the device: the CPU, or which GPU (failing when a GPU asked for is missing)"),
        ("precision", "set the arithmetic: fp32, tf32, amp (fp16 with loss scaling) or bf16"),
        ("loss", "the loss, on logits: softmax (cnn, gru) or sigmoid (densenet121) cross-entropy"),
        ("optimizer", "the optimizer: SGD with plain momentum (cnn) or Adam (gru, densenet121), and its settings"),
        ("train-step", "one training step: forward, loss, gradients, update (or the call that owns the loop)"),
        ("evaluate", "evaluation without gradients, dropout off and BatchNorm on its running statistics"),
        ("inference", "the timed no-grad forward pass over the images, copies in and out included"),
        (
            "data-parallel",
            "data parallelism over N devices: replicas, the split of each batch, the gradients' all-reduce",
        ),
        ("barrier", "the clock's barrier: wait for the device's queued work before reading the time"),
    ]
)
TRAINING = ("model", "init", "device", "precision", "loss", "optimizer", "train-step", "evaluate")
TASK_CONCEPTS = {
    "cnn": TRAINING + ("barrier",),
    "gru": TRAINING + ("barrier",),
    "resnet50": ("model", "init", "device", "precision", "inference", "barrier"),
    "densenet121": TRAINING + ("data-parallel", "barrier"),
}
# (package, task, concept): why that runner cannot show the concept. Empty: every runner marks every concept of its
# task, where a framework has no such code the marker says what it does instead (Keras' `fit` owns the step).
EXCEPTIONS: dict[tuple[str, str, str], str] = {}


class MarkerError(Exception):
    """A marker that names no concept of its file's task; the message names the file and line."""


def markers(path: str | Path, allowed: Collection[str] | None = None) -> list[tuple[int, int, str]]:
    """[(line index, indentation, concept)] of a file's markers, `end` included; a MarkerError for a name outside
    `allowed` (default: every concept)."""
    allowed = CONCEPTS if allowed is None else allowed
    found = []
    for i, line in enumerate(Path(path).read_text().splitlines()):
        match = MARKER.match(line)
        if match:
            name = match.group(2)
            if name != END and name not in allowed:
                raise MarkerError(
                    f"{path}:{i + 1}: `# rosetta: {name}` names no concept of "
                    f"{'this task' if allowed is not CONCEPTS else 'scripts/results/rosetta.py'}; known: "
                    f"{', '.join(allowed)}"
                )
            found.append((i, len(match.group(1)), name))
    return found


def indent(line: str) -> int:
    return len(line) - len(line.lstrip())


def cells(path: str | Path, allowed: Collection[str] | None = None) -> OrderedDict[str, list[tuple[int, str]]]:
    """{concept: [(first line number, text)]}: each marker's lines (the rule in the module docstring), dedented."""
    lines = Path(path).read_text().splitlines()
    found: OrderedDict[str, list[tuple[int, str]]] = OrderedDict()
    for start, depth, name in markers(path, allowed):
        if name == END:
            continue
        taken = []
        for line in lines[start + 1 :]:
            match = MARKER.match(line)
            if not line.strip() or indent(line) < depth or (match and len(match.group(1)) <= depth):
                break
            if not match:
                taken.append(line)
        if not "".join(taken).strip():
            raise MarkerError(
                f"{path}:{start + 1}: `# rosetta: {name}` marks no lines (a blank line or marker follows it)"
            )
        found.setdefault(name, []).append((start + 2, textwrap.dedent("\n".join(taken))))
    return found


def shared_files(path: str | Path) -> list[Path]:
    """The files of a runner's package that no task owns (`__init__.py`, `keras.R`, `common.jl`, `networks.py`)."""
    return sorted(p for p in Path(path).parent.iterdir() if p.suffix in SOURCES and p.stem not in TASKS)


def concepts_of(task: str, path: str | Path) -> OrderedDict[str, list[tuple[Path, int, str]]]:
    """OrderedDict(concept -> [(file, first line number, text)]) for one runner, in the registry's order: the task
    module's cells, else those its package's shared files mark. Concepts nobody marked are absent."""
    own = cells(path, TASK_CONCEPTS[task])
    shared = [(p, cells(p)) for p in shared_files(path)]
    found: OrderedDict[str, list[tuple[Path, int, str]]] = OrderedDict()
    for concept in TASK_CONCEPTS[task]:
        snippets = [(Path(path), n, text) for n, text in own.get(concept, ())] or [
            (p, n, text) for p, marked in shared for n, text in marked.get(concept, ())
        ]
        if snippets:
            found[concept] = snippets
    return found
