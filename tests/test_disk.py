"""What keeps the suite within a shared, tight disk (CI's): environments share identical files, `make images LEAN=1`
drops each wheelhouse after its last image, and the images share the layer that names no family."""

import os
import re
import shutil

import pytest

from scripts.launch import images, venvs
from scripts.paths import ROOT
from scripts.plan.matrix import load

pytestmark = pytest.mark.unit


@pytest.mark.skipif(shutil.which("hardlink") is None, reason="util-linux's hardlink is not on this host")
def test_identical_files_of_two_environments_become_one_and_different_ones_stay_apart(tmp_path, monkeypatch):
    for env in ("tensorflow", "r-keras"):
        site = tmp_path / env / "site-packages"
        site.mkdir(parents=True)
        (site / "big.so").write_bytes(b"the same library" * 4096)
        (site / "own.py").write_text(f"name = {env!r}\n")
        (site / "same.py").write_text("import os\n")  # a source: its .pyc holds its time, so never linked
        (site / "tool").write_bytes(b"the same bytes, another mode")
    (tmp_path / "r-keras" / "site-packages" / "tool").chmod(0o755)
    os.utime(tmp_path / "tensorflow" / "site-packages" / "big.so", (0, 0))  # pip's install times differ
    monkeypatch.setattr(venvs, "VENVS", tmp_path)
    venvs.share_identical_files()
    inode = {
        name: {(tmp_path / env / "site-packages" / name).stat().st_ino for env in ("tensorflow", "r-keras")}
        for name in ("big.so", "own.py", "tool", "same.py")
    }
    assert len(inode["big.so"]) == 1  # one copy on the disk
    assert len(inode["own.py"]) == 2 and len(inode["tool"]) == 2 and len(inode["same.py"]) == 2
    assert (tmp_path / "r-keras" / "site-packages" / "own.py").read_text() == "name = 'r-keras'\n"


def test_lean_removes_a_wheelhouse_after_its_last_image_only(tmp_path, monkeypatch):
    matrix = load()
    pytorch = matrix.frameworks["pytorch"].variants
    pairs = [
        ("pytorch", pytorch["cpu"]),
        ("pytorch", pytorch["cu130"]),
        ("chainer", matrix.frameworks["chainer"].variants["cpu"]),
    ]
    monkeypatch.setattr(images, "ROOT", tmp_path)
    monkeypatch.setattr(images, "wanted", lambda *args: pairs)
    monkeypatch.setattr(images, "docker_cli", lambda: "docker")
    monkeypatch.setattr(images, "check_engine", lambda docker: {})
    seen = []

    def build(docker, family, variant, gpu_alias=False, parent=None):
        house = images.wheelhouse_of(family, variant)
        assert house.is_dir(), f"{variant.image(family)} found its wheelhouse removed"
        seen.append((variant.image(family), sorted(p.name for p in (tmp_path / ".wheelhouse").iterdir())))

    for family, variant in pairs:
        images.wheelhouse_of(family, variant).mkdir(parents=True, exist_ok=True)
    monkeypatch.setattr(images, "build", build)
    assert images.main(["--profile", "containers", "--lean"]) == 0
    assert seen == [
        ("rosetta/pytorch:cpu", ["chainer-requirements", "pytorch-requirements"]),
        ("rosetta/pytorch:cu130", ["chainer-requirements", "pytorch-requirements"]),  # shared: kept
        ("rosetta/chainer:cpu", ["chainer-requirements"]),
    ]
    assert list((tmp_path / ".wheelhouse").iterdir()) == []


def test_without_lean_every_wheelhouse_stays(tmp_path, monkeypatch):
    variant = load().frameworks["chainer"].variants["cpu"]
    monkeypatch.setattr(images, "ROOT", tmp_path)
    monkeypatch.setattr(images, "wanted", lambda *args: [("chainer", variant)])
    monkeypatch.setattr(images, "docker_cli", lambda: "docker")
    monkeypatch.setattr(images, "check_engine", lambda docker: {})
    monkeypatch.setattr(images, "build", lambda *args, **kwargs: None)
    images.wheelhouse_of("chainer", variant).mkdir(parents=True)
    assert images.main(["--profile", "containers"]) == 0
    assert images.wheelhouse_of("chainer", variant).is_dir()


def test_the_shared_dockerfile_installs_the_common_packages_before_anything_names_the_family():
    """BuildKit reuses a layer only where every line above it is the same: the Debian packages every image needs come
    before the first line that names the family (a build argument declared above a RUN is part of its key too)."""
    final_stage = (ROOT / "docker" / "Dockerfile").read_text().split("FROM ${BASE_IMAGE}")[1]
    instructions = [line for line in final_stage.splitlines() if re.match(r"(RUN|COPY|ARG|ENV) ", line)]
    common = next(i for i, line in enumerate(instructions) if line.startswith("RUN apt-get"))
    assert not any("FAMILY" in line for line in instructions[:common])  # a declared ARG is in a RUN's key too
    assert instructions[common + 1] == "ARG FAMILY=pytorch"
