"""The mutation benchmarks still fit the code they mutate (bench/mutate_verdicts.py, bench/mutate_safety.py): every
mutation's text occurs exactly once in its file and changes it, and the tests that guard it exist. A refactor that
moves or rewrites a check then fails here, in `make test`, instead of breaking the next bench run."""
from pathlib import Path

import pytest

from bench import mutate_safety, mutate_verdicts

ROOT = Path(__file__).resolve().parents[1]
EDITS = [(name, file, old, new, tuple(tests)) for name, file, old, new, tests in mutate_verdicts.MUTATIONS] + [
    (m.name, m.file, old, new, m.tests) for m in mutate_safety.MUTATIONS for old, new in m.edits]


@pytest.mark.parametrize("name, file, old, new, tests", EDITS, ids=[f"{e[0]}:{i}" for i, e in enumerate(EDITS)])
def test_every_mutation_applies_once_and_is_guarded(name, file, old, new, tests):
    assert (ROOT / file).read_text().count(old) == 1, f"{name}: update the bench to the code in {file}"
    assert old != new
    assert tests and all((ROOT / test).is_file() for test in tests)


def test_no_two_mutations_share_a_name():
    names = [name for name, *_ in mutate_verdicts.MUTATIONS] + [m.name for m in mutate_safety.MUTATIONS]
    assert len(names) == len(set(names))
