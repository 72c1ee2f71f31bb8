"""The mutation benchmarks still fit the code they mutate (bench/mutate_verdicts.py, bench/mutate_safety.py): every
mutation's code occurs exactly once in its file (by tokens, bench/locate.py) and changes it, and the tests that guard
it exist. A refactor that rewrites a check fails here, in the unit tier, instead of breaking the next bench run; a
line only re-wrapped, re-quoted or re-commented does not."""

from pathlib import Path

import pytest

from bench import locate, mutate_safety, mutate_verdicts

pytestmark = pytest.mark.unit

ROOT = Path(__file__).resolve().parents[1]
EDITS = [(name, file, old, new, tuple(tests)) for name, file, old, new, tests in mutate_verdicts.MUTATIONS] + [
    (m.name, m.file, old, new, m.tests) for m in mutate_safety.MUTATIONS for old, new in m.edits
]
SOURCES = {file: (ROOT / file).read_text() for _, file, *_ in EDITS}


@pytest.mark.parametrize("name, file, old, new, tests", EDITS, ids=[f"{e[0]}:{i}" for i, e in enumerate(EDITS)])
def test_every_mutation_applies_once_and_is_guarded(name, file, old, new, tests):
    assert locate.count(SOURCES[file], old) == 1, f"{name}: update the bench to the code in {file}"
    assert locate.apply(SOURCES[file], old, new) != SOURCES[file]
    assert tests and all((ROOT / test).is_file() for test in tests)


def test_no_two_mutations_share_a_name():
    names = [name for name, *_ in mutate_verdicts.MUTATIONS] + [m.name for m in mutate_safety.MUTATIONS]
    assert len(names) == len(set(names))


SOURCE = """LIMIT = 1.25  # the whole run's
def judge(rest, same_class):
    off = same_class and (rest > LIMIT or rest < 1 / LIMIT)
    return f(key='a')
"""


@pytest.mark.parametrize(
    "layout",
    [
        SOURCE,
        SOURCE.replace("  # the whole run's", "  # reworded: the run as a whole"),
        SOURCE.replace(
            "(rest > LIMIT or rest < 1 / LIMIT)", "(\n        rest > LIMIT\n        or rest < 1 / LIMIT\n    )"
        ),
        SOURCE.replace("key='a'", 'key="a"').replace("LIMIT = 1.25", "LIMIT=1.25"),
    ],
)
def test_a_mutation_finds_its_code_however_it_is_laid_out(layout):
    mutated = locate.apply(layout, "off = same_class and (rest > LIMIT or rest < 1 / LIMIT)", "off = False")
    assert "off = False" in mutated and "rest > LIMIT" not in mutated and mutated.count("LIMIT") == 1
    assert locate.count(layout, "LIMIT = 1.25 ") == 1 and locate.count(layout, "f(key='a')") == 1


def test_a_mutation_that_breaks_the_syntax_is_refused_not_counted_as_killed():
    with pytest.raises(ValueError, match="syntax error"):
        locate.apply(SOURCE, "off = same_class and (rest > LIMIT or rest < 1 / LIMIT)", "off = (")


def test_a_changed_or_repeated_line_stops_the_mutation():
    assert locate.count(SOURCE.replace("rest < 1 / LIMIT", "rest <= 1 / LIMIT"), "rest < 1 / LIMIT") == 0
    assert locate.count(SOURCE, "LIMIT") == 3 and locate.count(SOURCE, "LIMIT = 1.2") == 0
    with pytest.raises(ValueError, match="occurs 3 times"):
        locate.apply(SOURCE, "LIMIT", "X")
