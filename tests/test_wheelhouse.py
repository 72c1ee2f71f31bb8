"""The wheelhouse outlives its downloads: it keeps each wheel's SHA-256 as first downloaded and refuses to build from
a wheel swapped in the folder since (scripts/launch/wheelhouse.py)."""

import sys

import pytest

from scripts.launch import wheelhouse

pytestmark = pytest.mark.unit


def fill(folder, **wheels):
    folder.mkdir(exist_ok=True)
    for name, content in wheels.items():
        (folder / f"{name}-1.0-py3-none-any.whl").write_bytes(content)


def test_hashes_are_kept_on_first_sight_and_new_wheels_added(tmp_path):
    fill(tmp_path, a=b"first")
    assert wheelhouse.check_sums(tmp_path) == []
    fill(tmp_path, b=b"second")  # a later download adds a wheel
    assert wheelhouse.check_sums(tmp_path) == []
    lines = (tmp_path / "SHA256SUMS").read_text().splitlines()
    assert [line.split("  ")[1] for line in lines] == ["a-1.0-py3-none-any.whl", "b-1.0-py3-none-any.whl"]
    assert all(len(line.split("  ")[0]) == 64 for line in lines)


def test_a_wheel_changed_since_it_was_downloaded_stops_the_build(tmp_path, monkeypatch, capsys):
    house = tmp_path / "house"
    fill(house, a=b"first")
    requirements = tmp_path / "requirements.txt"
    requirements.write_text("a==1.0\n")
    # pip download itself is not under test: it finds everything already there
    monkeypatch.setattr(wheelhouse, "download_command", lambda *args, **kwargs: [sys.executable, "-c", "pass"])
    argv = ["--requirements", str(requirements), "--dest", str(house)]
    assert wheelhouse.main(argv) == 0
    kept = (house / "SHA256SUMS").read_text()
    fill(house, a=b"swapped")
    assert wheelhouse.main(argv) == 1
    err = capsys.readouterr().err
    assert "a-1.0-py3-none-any.whl" in err and "changed since they were downloaded" in err and f"delete {house}" in err
    assert (house / "SHA256SUMS").read_text() == kept  # the swapped wheel's hash was not taken
