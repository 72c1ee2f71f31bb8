"""The cores' distance probe (shared/placement.py): a round trip between the first two CPUs, measured in a process of
its own, None where there are fewer than two; every CPU cell records it before and after its work."""

import json
import math
import os
import subprocess
import sys
from pathlib import Path

import pytest

from shared import placement

pytestmark = pytest.mark.unit

ROOT = Path(__file__).resolve().parents[1]
TWO_CPUS = pytest.mark.skipif(len(os.sched_getaffinity(0)) < 2, reason="the probe needs two CPUs")


@TWO_CPUS
def test_a_round_trip_between_the_first_two_cpus_takes_nanoseconds_and_leaves_the_affinity_as_it_was():
    mine = os.sched_getaffinity(0)
    value = placement.round_trip_ns(0.05)
    assert math.isfinite(value) and 10 < value < 1e6  # a cache line's trip, not a scheduler's time slice
    assert os.sched_getaffinity(0) == mine and placement.cpus() == sorted(mine)[:2]


@TWO_CPUS
def test_measure_runs_the_probe_in_a_process_of_its_own_and_says_which_cpus():
    found = placement.measure()
    assert set(found) == {"round_trip_ns", "cpus"} and found["cpus"] == sorted(os.sched_getaffinity(0))[:2]
    assert found["round_trip_ns"] > 10


def test_one_cpu_has_no_distance_to_measure():
    code = (
        "import os, json; os.sched_setaffinity(0, sorted(os.sched_getaffinity(0))[:1]); "
        "from shared import placement; print(json.dumps([placement.cpus(), placement.round_trip_ns(0.05), "
        "placement.measure()]))"
    )
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT)
    assert proc.returncode == 0 and json.loads(proc.stdout) == [None, None, None], proc.stderr


@TWO_CPUS
def test_the_command_watches_the_distance_for_a_while():
    proc = subprocess.run(
        [sys.executable, "-m", "shared.placement", "--watch", "1"], capture_output=True, text=True, cwd=ROOT, timeout=60
    )
    lines = proc.stdout.splitlines()
    assert proc.returncode == 0 and 1 <= len(lines) <= 3 and all(line.endswith(" ns") for line in lines)


@TWO_CPUS
def test_a_child_that_cannot_pin_itself_gives_no_value_instead_of_a_hang(monkeypatch):
    real = os.sched_setaffinity
    parent = os.getpid()

    def refuse_in_the_child(pid, cpus):
        if os.getpid() != parent:
            raise OSError(22, "Invalid argument")
        real(pid, cpus)

    monkeypatch.setattr(os, "sched_setaffinity", refuse_in_the_child)
    assert placement.round_trip_ns(0.05) is None


@TWO_CPUS
def test_the_probe_between_windows_answers_each_call_until_closed():
    between = placement.Between()
    try:
        values = [between() for _ in range(3)]
    finally:
        between.close()
    assert all(10 < value < 1e6 for value in values), values
    assert between() is None  # closed: no value, no error


def test_the_probe_between_windows_on_one_cpu_or_with_a_child_that_cannot_pin_itself_gives_none_at_once():
    code = (
        "import os, json, time; os.sched_setaffinity(0, sorted(os.sched_getaffinity(0))[:1]); "
        "from shared import placement; b = placement.Between(); print(json.dumps([b(), b()])); b.close()"
    )
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT, timeout=60)
    assert proc.returncode == 0 and json.loads(proc.stdout) == [None, None], proc.stderr


@TWO_CPUS
def test_a_server_whose_other_end_cannot_pin_itself_answers_none_and_stops_asking_it():
    code = (
        "import os, sys, runpy; real = os.sched_setaffinity; parent = os.getpid()\n"
        "def refuse(pid, cpus):\n"
        "    if os.getpid() != parent: raise OSError(22, 'Invalid argument')\n"
        "    real(pid, cpus)\n"
        "os.sched_setaffinity = refuse\n"
        "from shared import placement; sys.exit(placement.serve())\n"
    )
    proc = subprocess.run(
        [sys.executable, "-c", code], input="\n\n\n", capture_output=True, text=True, cwd=ROOT, timeout=30
    )
    assert proc.returncode == 0 and proc.stdout.split() == ["null"] * 3, proc.stderr


def test_every_round_trip_the_committed_records_hold_lies_within_what_the_probe_can_read():
    """placement.FLOOR_NS and CEILING_NS bound what verify believes (scripts/results/evidence.py): every round trip of
    every committed record (the references and the honest runs under tests/data, at window edges and around the
    work) lies within them, the lowest 200 ns and the highest under 1 µs."""
    found = []
    for path in [*ROOT.glob("results/reference/**/*.json"), *ROOT.glob("tests/data/**/*.json")]:
        record = json.loads(path.read_text())
        if not isinstance(record, dict) or not isinstance(record.get("timing"), dict):
            continue
        where = (record.get("system") or {}).get("placement") or {}
        trips = (record["timing"].get("round_trips_ns") or []) + [where.get("before_ns"), where.get("after_ns")]
        found += [t for t in trips if isinstance(t, (int, float))]
    assert len(found) > 5000
    assert placement.FLOOR_NS < min(found) and max(found) < placement.CEILING_NS / 10, (min(found), max(found))
