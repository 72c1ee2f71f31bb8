"""System requirements (scripts/launch/syspackages.py): one source of truth per family, a pre-flight before any cell, an
install where this process may, and otherwise `skipped` cells carrying the exact command, never `failed` ones.

apt-get and sudo are fakes on PATH here (shell scripts that log what they were asked and "install" a program the
check looks for), so no test touches the machine's packages."""

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import ROOT

from scripts.launch import syspackages, venvs
from scripts.launch.executors import LocalExecutor, RunSettings
from scripts.plan.matrix import Plan, expand, load
from scripts.run import execute, local_environments
from shared.record import read_record

pytestmark = pytest.mark.unit

FAKE_CHECK = "exe:rosetta-fake-tool"


def fake_bin(tmp_path, apt="install", sudo=None):
    """A PATH folder with a fake apt-get (install: `install` puts rosetta-fake-tool beside it, `fail` prints apt's
    error and exits 100) and, where asked, a fake sudo (`ok` runs the command, `password` refuses -n)."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir(exist_ok=True)
    log = tmp_path / "apt.log"
    installing = 'case " $* " in *" install "*) false;; esac || '  # what follows runs for `apt-get … install`
    body = {
        "install": f'{installing}printf "#!/bin/sh\\n" > {bin_dir}/rosetta-fake-tool '
        f'&& chmod +x {bin_dir}/rosetta-fake-tool\necho "Setting up rosetta-fake ..."',
        "fail": f'{installing}{{ echo "Reading package lists..."; '
        'echo "E: Unable to locate package rosetta-fake"; exit 100; }\ntrue',
        "noop": "true",
    }[apt]
    (bin_dir / "apt-get").write_text(f'#!/bin/sh\necho "apt-get $* [$DEBIAN_FRONTEND]" >> {log}\n{body}\n')
    if sudo:
        (bin_dir / "sudo").write_text(
            '#!/bin/sh\n[ "$1" = -n ] && shift\n'
            + ('exec "$@"\n' if sudo == "ok" else 'echo "sudo: a password is required" >&2\nexit 1\n')
        )
    for tool in bin_dir.iterdir():
        tool.chmod(0o755)
    return bin_dir, log


@pytest.fixture
def host(tmp_path, monkeypatch):
    """A host whose PATH is the fake folder plus the system's basic tools, and no NO_SYSTEM_PACKAGES."""

    def make(uid=0, system_tools=True, **fakes):
        bin_dir, log = fake_bin(tmp_path, **fakes)
        monkeypatch.setenv("PATH", f"{bin_dir}:/usr/bin:/bin" if system_tools else str(bin_dir))
        monkeypatch.delenv("NO_SYSTEM_PACKAGES", raising=False)
        monkeypatch.setattr(os, "geteuid", lambda: uid)
        monkeypatch.setattr(syspackages, "LOG", tmp_path / "apt-output.log")
        return log

    return make


REQUIREMENT = syspackages.Requirement("rosetta-fake", (FAKE_CHECK,), "docker/fake/apt-packages.txt")


# ---------------------------------------------------------------- the source of truth


def test_every_family_file_parses_and_the_images_install_the_same_packages():
    """Each docker/FAMILY/apt-packages.txt line is a package with at least one check; the Dockerfiles take the first
    word of each line with sed, which must give exactly the packages the host side reads."""
    files = sorted(ROOT.glob("docker/*/apt-packages.txt")) + [syspackages.TESTS]
    assert {p.parent.name for p in files} >= {"cntk", "theano", "caffe2", "r-keras", "r-mxnet", "tests"}
    extract = re.search(
        r"\$\((?:if [^;]+; then )?(sed [^)]+?) /tmp/family/apt-packages\.txt",
        (ROOT / "docker" / "pyenv.Dockerfile").read_text(),
    ).group(1)
    assert extract in (ROOT / "docker" / "Dockerfile").read_text()
    for path in files:
        requirements = syspackages.read(path)
        assert requirements and all(r.checks for r in requirements)
        words = subprocess.run(f"{extract} {path}", shell=True, capture_output=True, text=True, check=True).stdout
        assert words.split() == [r.package for r in requirements], path
    assert [r.package for r in syspackages.for_family("cntk")] == ["libopenmpi3"]
    assert "lib:libopenblas.so" in syspackages.for_family("theano")[1].checks  # Theano links -lopenblas
    assert syspackages.for_family("pytorch") == ()


def test_a_malformed_line_names_the_file_the_line_and_the_format(tmp_path):
    for line in ("libfoo", "libfoo lib", "libfoo dll:foo.so", "Bad_Name exe:x"):
        path = tmp_path / "apt-packages.txt"
        path.write_text(f"# comment\n\n{line}\n")
        with pytest.raises(syspackages.SystemPackageError, match=r"apt-packages\.txt:3: .*lib:SONAME"):
            syspackages.read(path)
    path.write_text("g++   exe:g++   # the compiler\nlibgomp1 lib:libgomp.so.1 exe:true\n")
    assert [r.checks for r in syspackages.read(path)] == [("exe:g++",), ("lib:libgomp.so.1", "exe:true")]


def test_checks_find_libraries_programs_and_say_what_is_missing():
    present = syspackages.Requirement("libc6", ("lib:libc.so.6", "exe:sh"), "x")
    absent = syspackages.Requirement("nothing", ("lib:librosetta-none.so.9", "exe:rosetta-none", "exe:sh"), "x")
    assert syspackages.unmet([present, absent]) == {
        absent: ["library librosetta-none.so.9 not found", "no rosetta-none on PATH"]
    }


# ---------------------------------------------------------------- installing, or saying how


def test_root_installs_what_is_missing_in_one_apt_call(host, capsys):
    log = host(uid=0)
    assert syspackages.ensure({"fake": [REQUIREMENT]}) == {}
    calls = log.read_text().splitlines()
    assert calls == [
        "apt-get -o DPkg::Lock::Timeout=300 update -q [noninteractive]",
        "apt-get -o DPkg::Lock::Timeout=300 install -y -q --no-install-recommends rosetta-fake [noninteractive]",
    ]
    out = capsys.readouterr().out
    assert "fake needs rosetta-fake (no rosetta-fake-tool on PATH)" in out and "installing rosetta-fake" in out
    # apt-get's own output goes to a log the screen names, not between the user and the first cell
    assert "Setting up rosetta-fake" in syspackages.LOG.read_text() and "Setting up" not in out
    assert f"apt-get's output: {syspackages.LOG}" in out
    assert syspackages.ensure({"fake": [REQUIREMENT]}) == {}  # now present: nothing asked of apt again
    assert len(log.read_text().splitlines()) == 2


def test_sudo_without_a_password_installs(host):
    log = host(uid=1000, sudo="ok")
    assert syspackages.ensure({"fake": [REQUIREMENT]}) == {}
    assert "install -y -q --no-install-recommends rosetta-fake" in log.read_text()


@pytest.mark.parametrize("case", ["opt-out", "no-sudo", "apt-fails", "no-apt"])
def test_where_nothing_can_be_installed_the_reason_gives_the_command(host, monkeypatch, capsys, case):
    log = host(
        uid=0 if case in ("opt-out", "apt-fails") else 1000,
        sudo="password",
        apt="fail" if case == "apt-fails" else "install",
        system_tools=case != "no-apt",
    )
    if case == "opt-out":
        monkeypatch.setenv("NO_SYSTEM_PACKAGES", "1")
    if case == "no-apt":
        (log.parent / "bin" / "apt-get").unlink()
    reason = syspackages.ensure({"fake": [REQUIREMENT]}, syspackages.refusal())["fake"]
    assert "no rosetta-fake-tool on PATH" in reason
    if case == "no-apt":
        assert "Debian/Ubuntu: rosetta-fake" in reason
        return
    sudo = "" if case in ("opt-out", "apt-fails") else "sudo "
    assert f"run `{sudo}apt-get install -y --no-install-recommends rosetta-fake`" in reason
    said = capsys.readouterr().out
    assert {
        "opt-out": "NO_SYSTEM_PACKAGES is set",
        "no-sudo": "`sudo -n` cannot run apt-get without a password",
        "apt-fails": "E: Unable to locate package rosetta-fake",
    }[case] in said
    assert ("E: Unable to locate package" in reason) == (case == "apt-fails")  # the cause reaches the record
    assert (log.exists() and "install" in log.read_text()) == (case == "apt-fails")


def test_the_cli_checks_and_installs(host, capsys):
    host(uid=1000)
    assert syspackages.main(["pytorch", "--check"]) == 0
    assert syspackages.main(["no-such-family"]) == 2
    assert "unknown family 'no-such-family'" in capsys.readouterr().err


# ---------------------------------------------------------------- in a run: skipped with the command, never failed


def test_a_family_whose_packages_are_absent_is_skipped_before_any_cell(host, monkeypatch, tmp_path, synthetic_data):
    """NO_SYSTEM_PACKAGES (or no root, no sudo): CNTK's cells are `skipped` with the apt-get command, its environment
    is not even built (CNTK's post-install would fail without OpenMPI), and the other frameworks run."""
    log = host(uid=0)
    monkeypatch.setenv("NO_SYSTEM_PACKAGES", "yes")
    monkeypatch.setattr(syspackages, "for_family", lambda family: (REQUIREMENT,) if family == "cntk" else ())
    built = []
    monkeypatch.setattr("scripts.launch.prepare.ensure", lambda fw: built.append(fw.id) or sys.executable)
    matrix = load()
    cells = tuple(
        c for c in expand(matrix, "demo").cells if c.framework in ("cntk", "keras2-cntk", "pytorch") and c.task == "cnn"
    )
    plan = Plan("demo", "local", 1, 30.0, cells)
    pythons, unavailable = local_environments(plan, matrix, syspackages.refusal())
    assert built == ["pytorch"] and set(pythons) == {"pytorch"}
    for fid in ("cntk", "keras2-cntk"):
        status, reason = unavailable[fid]
        assert status == "skipped" and "apt-get install -y --no-install-recommends rosetta-fake" in reason
    assert not log.exists()

    executor = LocalExecutor({"pytorch": sys.executable}, root=ROOT / "tests" / "fake")
    reasons = {c.id: unavailable[c.framework][1] for c in cells if c.framework in unavailable}
    execute(plan, executor, tmp_path, RunSettings("t", 1, 30.0, synthetic_data.parent), unfit=reasons)
    records = {read_record(p)["cell"]["framework"]: read_record(p) for p in (tmp_path / "cells").glob("*.json")}
    assert records["cntk"]["status"] == "skipped" and "rosetta-fake" in records["cntk"]["reason"]
    assert records["pytorch"]["status"] == "ok"


def test_an_environment_that_fails_to_build_carries_pips_own_words():
    """The cause of a failed build (pip's error, post_install.py's message) goes into the reason, not only the
    scrolled-away console: here a real pip asked for a package no index has."""
    fw = load().frameworks["pytorch"]
    argv = [
        sys.executable,
        "-m",
        "pip",
        "install",
        "--no-index",
        "--disable-pip-version-check",
        "rosetta-no-such-package==1.0",
    ]
    with pytest.raises(venvs.EnvBuildError) as e:
        venvs.run_step(argv, fw)
    message = str(e.value)
    assert "No matching distribution found for rosetta-no-such-package==1.0" in message
    assert "exited 1" in message and "python -m scripts.launch.venvs pytorch" in message


def test_the_cntk_post_install_names_the_package_when_openmpi_is_missing(tmp_path):
    """What used to scroll past: CNTK's post-install without libopenmpi3 says which package, and the build error
    carries that line."""
    site = tmp_path / "site"
    (site / "cntk" / "libs").mkdir(parents=True)
    script = ROOT / "docker" / "cntk" / "post_install.py"
    code = (
        f"import sysconfig, runpy; sysconfig.get_paths = lambda: {{'purelib': {str(site)!r}}}; "
        f"import sys; sys.argv = [{str(script)!r}]; "
        f"main = runpy.run_path({str(script)!r})['main']; main.__globals__['SEARCH'] = ({str(tmp_path)!r},); main()"
    )
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert proc.returncode == 1 and "apt-get install libopenmpi3" in proc.stderr


# ---------------------------------------------------------------- no pipe races

EARLY_READER = re.compile(r"\|\s*(grep\s+(-\w*[qm]\w*|--max-count|--quiet)|head\b)")


def shell_under_pipefail():
    """(path, text) of every shell text that runs with pipefail: CI's scripts, the workflows' `run:` steps (GitHub's
    bash runs `-eo pipefail`), and the Slurm scripts scripts/launch/slurm.py writes."""
    for path in sorted((ROOT / ".ci").iterdir()):
        yield path, path.read_text()
    for path in sorted((ROOT / ".github" / "workflows").glob("*.yml")):
        yield path, path.read_text()
    yield ROOT / "scripts" / "launch" / "slurm.py", (ROOT / "scripts" / "launch" / "slurm.py").read_text()


def test_no_reader_stops_a_pipe_early_under_pipefail():
    """`dpkg -L docker.io | grep -m1 …` under pipefail killed CI at random: when grep stops reading, dpkg may still be
    writing, dies of SIGPIPE, and pipefail fails the script. grep -q, grep -m and head are such readers."""
    found = [
        f"{path.relative_to(ROOT)}: {line.strip()}"
        for path, text in shell_under_pipefail()
        for line in text.splitlines()
        if EARLY_READER.search(line) and not line.lstrip().startswith("#")
    ]
    assert not found, found
    assert EARLY_READER.search("DOCKER=$(dpkg -L docker.io | grep -m1 'bin/docker$')")  # the pattern it was


def test_docker_setup_finds_the_cli_without_a_pipe(tmp_path):
    """The replacement reads dpkg's whole list, so a long list cannot race."""
    script = (ROOT / ".ci" / "docker-setup.sh").read_text()
    block = script[script.index("mapfile -t clis") : script.index('log "docker CLI')]
    listing = "\n".join([f"/usr/share/doc/x{i}" for i in range(20000)] + ["/usr/bin/docker", "/usr/sbin/dockerd"])
    fake = tmp_path / "dpkg"
    fake.write_text(f"#!/bin/sh\ncat <<'EOF'\n{listing}\nEOF\n")
    fake.chmod(0o755)
    proc = subprocess.run(
        ["bash", "-c", f'set -euo pipefail\nlog() {{ echo "$*"; }}\n{block}\necho "$DOCKER"'],
        capture_output=True,
        text=True,
        env={**os.environ, "PATH": f"{tmp_path}:{os.environ['PATH']}"},
    )
    assert proc.returncode == 0 and proc.stdout.strip() == "/usr/bin/docker", proc.stderr
    assert Path(fake).exists()
