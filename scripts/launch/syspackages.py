"""System requirements: what each framework family needs from the host's distribution, checked before any cell runs and
installed where this process may (as root, or through `sudo -n`, on Debian or Ubuntu).

    python -m scripts.launch.syspackages                     # check every family; install what is missing where allowed
    python -m scripts.launch.syspackages cntk theano --check # only say what is missing and the command that installs it
    python -m scripts.launch.syspackages --tests             # the test suite's own (a single-node Slurm; as root only)

One source of truth: docker/FAMILY/apt-packages.txt, which the family's image installs too, and tests/apt-packages.txt.
Each line names a Debian package and what shows that it is there, so a host that got it some other way passes:

    libopenmpi3        lib:libmpi.so.40 lib:libmpi_cxx.so.40    a shared library the loader finds
    g++                exe:g++                                   a program on PATH (or in /usr/sbin)
    r-cran-reticulate  r:reticulate                              an R package that Rscript loads

Nothing is installed when NO_SYSTEM_PACKAGES is set (to anything but 0, false or no) or with --no-system-packages: then,
as where this process cannot install, the cells of the families concerned are recorded `skipped` with the exact command
that installs what they need. A package that is simply absent never fails a cell.
"""

import argparse
import os
import re
import shutil
import subprocess
import sys
import time
from collections import deque
from collections.abc import Callable, Container, Iterable, Mapping, Sequence
from contextlib import nullcontext
from dataclasses import dataclass
from pathlib import Path

from scripts.paths import ROOT

LOG = ROOT / ".venv" / "system-packages.log"  # apt-get's output, kept off the screen (beside the environments)

TESTS = ROOT / "tests" / "apt-packages.txt"
PACKAGE = re.compile(r"[a-z0-9][a-z0-9+.-]+")
CHECK = re.compile(r"(lib|exe|r):[A-Za-z0-9_.+-]+")
SBIN = ("/usr/sbin", "/sbin")  # daemons (slurmctld) and ldconfig live here, off a normal user's PATH
LIB_DIRS = ("/lib", "/usr/lib", "/lib64", "/usr/lib64", "/usr/local/lib")
APT_ENV = "DEBIAN_FRONTEND=noninteractive"


class SystemPackageError(Exception):
    """A requirements file that cannot be read, or an install that failed; the message says which and what to do."""


@dataclass(frozen=True)
class Requirement:
    package: str  # the Debian package that provides it
    checks: tuple  # ("lib:libmpi.so.40", …): all must pass
    source: str  # the file that asks for it, relative to the checkout


def read(path: str | Path) -> tuple[Requirement, ...]:
    """The requirements of one apt-packages.txt; a malformed line is an error naming the file, line and format."""
    path = Path(path)
    requirements = []
    for number, line in enumerate(path.read_text().splitlines(), 1):
        words = line.split("#", 1)[0].split()
        if not words:
            continue
        package, checks = words[0], tuple(words[1:])
        bad = [c for c in checks if not CHECK.fullmatch(c)]
        if not PACKAGE.fullmatch(package) or bad or not checks:
            raise SystemPackageError(
                f"{path}:{number}: {line.strip()!r} is not `PACKAGE CHECK…` with at least one check of the form "
                f"lib:SONAME, exe:PROGRAM or r:RPACKAGE{f' (bad: {bad[0]!r})' if bad else ''}"
            )
        requirements.append(
            Requirement(package, checks, str(path.relative_to(ROOT) if path.is_relative_to(ROOT) else path))
        )
    return tuple(requirements)


def for_family(family: str) -> tuple[Requirement, ...]:
    """docker/FAMILY/apt-packages.txt's requirements; () where the family needs nothing beyond Python."""
    path = ROOT / "docker" / family / "apt-packages.txt"
    return read(path) if path.exists() else ()


# ---------------------------------------------------------------- checks


def loader_cache() -> set[str]:
    """The shared libraries the dynamic loader knows by name (`ldconfig -p`); empty where ldconfig is absent."""
    ldconfig = shutil.which("ldconfig") or next((f"{d}/ldconfig" for d in SBIN if Path(d, "ldconfig").exists()), None)
    if not ldconfig:
        return set()
    out = subprocess.run([ldconfig, "-p"], capture_output=True, text=True).stdout
    return {line.split()[0] for line in out.splitlines()[1:] if line.strip()}


def has_library(name: str, cache: Container[str]) -> bool:
    if name in cache:
        return True
    dirs = [Path(d) for d in LIB_DIRS] + [p for d in LIB_DIRS for p in Path(d).glob("*-linux-gnu")]
    return any((d / name).exists() for d in dirs)


def has_program(name: str) -> bool:
    return bool(shutil.which(name)) or any(Path(d, name).exists() for d in SBIN)


def has_r_package(name: str) -> bool:
    if not has_program("Rscript"):
        return False
    probe = f'quit(status = if (requireNamespace("{name}", quietly = TRUE)) 0 else 1)'
    return subprocess.run(["Rscript", "--vanilla", "-e", probe], capture_output=True).returncode == 0


def failed_checks(requirement: Requirement, cache: Container[str]) -> list[str]:
    """The checks of `requirement` that fail on this host, as a reader would say them ("libmpi.so.40 not found")."""
    found = {"lib": lambda name: has_library(name, cache), "exe": has_program, "r": has_r_package}
    words = {"lib": "library {} not found", "exe": "no {} on PATH", "r": "R package {} not loadable"}
    return [
        words[kind].format(name)
        for kind, name in (c.split(":", 1) for c in requirement.checks)
        if not found[kind](name)
    ]


def unmet(requirements: Iterable[Requirement]) -> dict[Requirement, list[str]]:
    """{requirement: [what failed]} for the requirements this host does not meet."""
    cache = loader_cache()
    failed = {r: failed_checks(r, cache) for r in requirements}
    return {r: why for r, why in failed.items() if why}


# ---------------------------------------------------------------- installing


def refusal(flag: bool = False) -> str | None:
    """Why nothing may be installed (--no-system-packages, or NO_SYSTEM_PACKAGES in the environment), or None."""
    if flag:
        return "--no-system-packages was given"
    if os.environ.get("NO_SYSTEM_PACKAGES", "").lower() not in ("", "0", "false", "no"):
        return "NO_SYSTEM_PACKAGES is set"
    return None


def installer() -> tuple[list[str], None] | tuple[None, str]:
    """(the argv prefix that runs apt-get as root, None), or (None, why this process cannot)."""
    if not shutil.which("apt-get"):
        return None, "this host has no apt-get (not Debian or Ubuntu)"
    if os.geteuid() == 0:
        return [], None
    if shutil.which("sudo") and subprocess.run(["sudo", "-n", "true"], capture_output=True).returncode == 0:
        return ["sudo", "-n"], None
    return None, "this process is not root and `sudo -n` cannot run apt-get without a password"


def install_command(packages: Iterable[str]) -> str:
    """What a person runs to install `packages` on Debian or Ubuntu."""
    sudo = "" if os.geteuid() == 0 else "sudo "
    return f"{sudo}apt-get install -y --no-install-recommends {' '.join(sorted(packages))}"


def meaningful(line: str) -> bool:
    """A line worth keeping as the cause of a failed install: not blank, not pip's upgrade notice, not progress."""
    text = line.strip()
    return bool(text) and not text.startswith(("[notice]", "Progress", "━")) and not set(text) <= set("-=#. ")


def tee(
    argv: Sequence[str], env: Mapping[str, str] | None = None, keep: int = 12, log: Path | None = None
) -> tuple[int, str]:
    """Run `argv` with its output shown as it comes (stdout and stderr together), or appended to `log` instead of
    the screen; returns (exit code, the last `keep` meaningful lines). apt-get here, pip and post_install.py in
    scripts/launch/venvs.py: a failure's cause is in those lines, which the caller puts into the record instead of
    asking the reader to scroll back."""
    proc = subprocess.Popen(
        argv,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        stdin=subprocess.DEVNULL,
        text=True,
        errors="replace",
        env=env,
        bufsize=1,
    )
    last: deque[str] = deque(maxlen=keep)
    assert proc.stdout is not None  # stdout=PIPE
    with proc.stdout, log.open("a") if log else nullcontext(sys.stdout) as out:
        for line in proc.stdout:
            out.write(line)
            if meaningful(line):
                last.append(line.rstrip())
        out.flush()
    return proc.wait(), "\n".join(last)


def install(packages: Iterable[str], prefix: Sequence[str], log: Path | None = None) -> None:
    """apt-get update, then install `packages` (recommends left out), as root through `prefix`; apt-get's output goes
    to `log` (hundreds of lines a user need not read before the first cell), its last lines into the error."""
    # Wait for a package manager that holds the lock (unattended upgrades on a fresh machine) instead of failing.
    apt = [*prefix, "env", APT_ENV, "apt-get", "-o", "DPkg::Lock::Timeout=300"]
    log = log or LOG
    log.parent.mkdir(parents=True, exist_ok=True)
    log.write_text("")
    for args in (["update", "-q"], ["install", "-y", "-q", "--no-install-recommends", *sorted(packages)]):
        code, last = tee(apt + args, log=log)
        if code:
            raise SystemPackageError(
                f"`{' '.join(apt[len(prefix) :] + args)}` exited {code} (all of it: {log}):\n{last}"
            )


def ensure(
    groups: Mapping[str, Iterable[Requirement]], refused: str | None = None, say: Callable[[str], object] = print
) -> dict[str, str]:
    """Check each group's requirements ({name: requirements}, a name being a family or `tests`), install what is
    missing in one apt-get call unless `refused` says why not (or this process cannot), and check again. Returns
    {name: reason} for the groups still missing something: what is missing and the exact command that installs it."""
    missing = {name: found for name, found in ((n, unmet(reqs)) for n, reqs in groups.items()) if found}
    if not missing:
        return {}
    prefix, why_not = installer()
    why_not = refused or why_not
    if not why_not:
        packages = sorted({r.package for found in missing.values() for r in found})
        for name, found in missing.items():
            say(
                f"system packages: {name} needs "
                + "; ".join(f"{r.package} ({', '.join(why)})" for r, why in found.items())
            )
        say(
            f"system packages: installing {' '.join(packages)} with apt-get{' through sudo' if prefix else ''}, "
            f"for {', '.join(missing)} (NO_SYSTEM_PACKAGES=1 turns this off; apt-get's output: {LOG})"
        )
        started = time.time()
        assert prefix is not None  # installer() gives no prefix only with a reason
        try:
            install(packages, prefix)
        except SystemPackageError as e:
            why_not = f"installing them failed: {e}"
        missing = {name: found for name, found in ((n, unmet(f)) for n, f in missing.items()) if found}
        if not missing:
            say(f"system packages: installed in {time.time() - started:.0f} s")
            return {}
        why_not = why_not or "apt-get installed them, yet the checks still fail"
    reasons = {}
    for name, found in missing.items():
        what = "; ".join(", ".join(why) for why in found.values())
        reasons[name] = f"system packages missing on this host ({what}): {fix(r.package for r in found)}, then rerun"
        if why_not.startswith("installing them failed"):
            reasons[name] += f" ({why_not})"
    everything = {r.package for found in missing.values() for r in found}
    say(
        f"system packages: {', '.join(missing)} lack {' '.join(sorted(everything))}, not installed because "
        f"{why_not}; without them their cells are skipped. To run them: {fix(everything).removeprefix('run ')}"
    )
    return reasons


def fix(packages: Iterable[str]) -> str:
    """The command, or on another distribution the advice, that installs `packages`."""
    if shutil.which("apt-get"):
        return f"run `{install_command(packages)}`"
    return f"install what provides it (Debian/Ubuntu: {' '.join(sorted(packages))})"


def main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m scripts.launch.syspackages", description=__doc__.split("\n")[0])
    ap.add_argument("families", nargs="*", help="framework families (docker/FAMILY); default: every family")
    ap.add_argument(
        "--tests",
        action="store_true",
        help="the test suite's own packages (installed as root only: the tests that use them need root)",
    )
    ap.add_argument("--check", action="store_true", help="only check and say what is missing; install nothing")
    ap.add_argument("--no-system-packages", action="store_true", help="as NO_SYSTEM_PACKAGES=1")
    args = ap.parse_args(argv)
    try:
        if args.tests:
            groups = {"tests": read(TESTS)}
        else:
            families = args.families or sorted(p.parent.name for p in ROOT.glob("docker/*/apt-packages.txt"))
            unknown = [f for f in families if not (ROOT / "docker" / f).is_dir()]
            if unknown:
                raise SystemPackageError(f"unknown family {unknown[0]!r}; families are the folders under docker/")
            groups = {family: for_family(family) for family in families}
        refused = (
            "--check installs nothing"
            if args.check
            else refusal(args.no_system_packages)
            or ("the tests that use them need root" if args.tests and os.geteuid() != 0 else None)
        )
        reasons = ensure(groups, refused)
    except SystemPackageError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    if not reasons:
        print(f"system packages: everything {', '.join(groups)} need is here")
    return 1 if reasons and args.check else 0


if __name__ == "__main__":
    sys.exit(main())
