"""Per-framework virtual environments for the local executor, built from the same pinned requirements as the images.

    python -m scripts.launch.venvs pytorch [tensorflow …]     # build (or confirm) .venv/FAMILY for each framework
    python -m scripts.launch.venvs --keep-going pytorch cntk …  # build what can be built; name what cannot and why

An environment is rebuilt when its requirements file changes (a stamp holds the file's hash). The Debian packages a
family needs (docker/FAMILY/apt-packages.txt) are checked first and installed where this process may
(scripts/launch/syspackages.py); an environment whose packages are missing is not built.
"""

import argparse
import hashlib
import os
import shutil
import subprocess
import sys
import time
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path

from scripts.launch import syspackages
from scripts.paths import ROOT
from scripts.plan.matrix import Framework, Matrix, MatrixError, load

VENVS = ROOT / ".venv"


class EnvError(Exception):
    """An environment that cannot be built here (no interpreter, a system package missing); the message says what is
    missing and what to do. Its cells are `skipped`: nothing is broken, something is absent."""


class EnvBuildError(Exception):
    """pip or post_install.py failed while building an environment; the message carries the last lines of their
    output (the real cause). Its cells are `failed`: a broken install, retried by --resume."""


def venv_dir(framework: Framework) -> Path:
    return VENVS / framework.family


def python_of(framework: Framework) -> Path:
    return venv_dir(framework) / "bin" / "python"


def local_requirements(framework: Framework) -> Path:
    """The requirements of the framework's CPU variant (else its first): what a venv on this host should mirror."""
    variants = framework.variants.values()
    return ROOT / next((v for v in variants if v.device == "cpu"), next(iter(variants))).requirements


def find_interpreter(version: str) -> str:
    """`pythonX.Y` on PATH first, then pyenv's; an EnvError naming both places if neither has it."""
    found = shutil.which(f"python{version}")
    if found and subprocess.run([found, "-c", ""], capture_output=True).returncode == 0:
        return found  # (a pyenv shim for a version that is installed but not selected exits 127)
    try:
        root = subprocess.run(["pyenv", "root"], capture_output=True, text=True, check=True).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        root = os.path.expanduser("~/.pyenv")
    for candidate in sorted(Path(root, "versions").glob(f"{version}.*/bin/python{version}"), reverse=True):
        return str(candidate)
    raise EnvError(
        f"no python{version} on PATH or under pyenv ({root}); install Python {version} or run this "
        f"framework in its container image (`make images`)"
    )


def post_install_script(requirements: Path) -> Path | None:
    """docker/FAMILY/post_install.py: what a family needs after pip (CNTK's OpenMPI links, Lasagne's Theano shim),
    run by the environment's own python here and in the image alike; None where the family needs nothing."""
    script = requirements.with_name("post_install.py")
    return script if script.exists() else None


def stamp_of(requirements: Path) -> str:
    script = post_install_script(requirements)
    extra = script.read_bytes() if script else b""
    return hashlib.sha256(requirements.read_bytes() + extra).hexdigest()


# The pip that Python 3.6-3.8's ensurepip bundles predates the wheel tags and metadata of today's index; these are the
# newest releases that still run on each (pip 22 dropped 3.6, pip 24 dropped 3.7).
BOOTSTRAP = {
    "3.6": ["pip<22", "setuptools<60", "wheel<0.38"],
    "3.7": ["pip<24", "setuptools<69", "wheel<0.43"],
    "3.8": ["pip<25", "setuptools<76", "wheel<0.46"],
}


def build_env(requirements: Path) -> dict[str, str] | None:
    """pip's environment: a family whose pins include sdists (Chainer) keeps the constraints their builds need in
    build-constraints.txt beside its requirements; PIP_CONSTRAINT reaches pip's isolated build environments too."""
    constraints = requirements.with_name("build-constraints.txt")
    return {**os.environ, "PIP_CONSTRAINT": str(constraints)} if constraints.exists() else None


def run_step(argv: Sequence[str | Path], framework: Framework, env: Mapping[str, str] | None = None) -> None:
    """One build step, its output shown as it comes; an EnvBuildError with the output's last lines if it fails."""
    code, last = syspackages.tee([str(a) for a in argv], env=env)
    if code:
        step = "post_install.py" if str(argv[-1]).endswith("post_install.py") else " ".join(map(str, argv[2:5]))
        raise EnvBuildError(
            f"building the {framework.family} environment failed: `{step} …` exited {code}; its "
            f"output ends:\n{last}\n(rebuild it with `python -m scripts.launch.venvs {framework.id}`)"
        )


def ensure(framework: Framework) -> Path:
    """Build the framework's venv unless it is already built from the current requirements; return its python.
    EnvError where something it needs is absent (interpreter, system package), EnvBuildError where pip fails."""
    requirements = local_requirements(framework)
    missing = syspackages.unmet(syspackages.for_family(framework.family))
    if missing:
        raise EnvError(
            "system packages missing on this host ("
            + "; ".join(", ".join(w) for w in missing.values())
            + f"): run `{syspackages.install_command(r.package for r in missing)}`"
        )
    target, stamp = venv_dir(framework), venv_dir(framework) / ".requirements.sha256"
    if stamp.exists() and stamp.read_text() == stamp_of(requirements) and python_of(framework).exists():
        return python_of(framework)
    interpreter = find_interpreter(framework.python)
    print(f"building {target} with Python {framework.python} from {requirements.relative_to(ROOT)} …", flush=True)
    started = time.time()
    shutil.rmtree(target, ignore_errors=True)
    run_step([interpreter, "-m", "venv", target], framework)
    pip: list[str | Path] = [python_of(framework), "-m", "pip", "install", "--disable-pip-version-check", "-q"]
    if framework.python in BOOTSTRAP:
        run_step(pip + ["-U", *BOOTSTRAP[framework.python]], framework)
    run_step(pip + ["-r", requirements], framework, env=build_env(requirements))
    script = post_install_script(requirements)
    if script:
        run_step([python_of(framework), script], framework)
    stamp.write_text(stamp_of(requirements))
    size = sum(f.stat().st_size for f in target.rglob("*") if f.is_file() and not f.is_symlink())
    print(f"built {target} in {time.time() - started:.0f} s ({size / 2**20:,.0f} MiB)", flush=True)
    return python_of(framework)


def prepare_system(frameworks: Iterable[Framework], refused: str | None = None) -> dict[str, str]:
    """Install, in one go, the system packages the families of `frameworks` lack (scripts/launch/syspackages.py);
    returns {framework id: reason} for those whose packages are still missing, which are then not built."""
    families = {fw.family: syspackages.for_family(fw.family) for fw in frameworks}
    reasons = syspackages.ensure(families, refused)
    return {fw.id: reasons[fw.family] for fw in frameworks if fw.family in reasons}


def share_identical_files() -> None:
    """Files that several environments hold byte for byte (TensorFlow in the tensorflow, keras and r-keras
    environments, MXNet in mxnet and r-mxnet, NumPy in most) become hard links to one copy, with util-linux's
    `hardlink` where the host has it: about 3 GB fewer on the disk. Only files of the same mode and owner are joined
    (their times may differ), and never Python sources: a compiled module (.pyc) is valid only for its source's
    modification time, and one inode has one, so every import of a linked .py would compile it again (PyTorch's
    imports took 5 s longer). Nothing writes into an installed file: pip replaces a package's files (new inodes), and
    an environment is rebuilt from scratch, so no environment can change another's."""
    tool = shutil.which("hardlink")
    if tool and VENVS.is_dir():
        subprocess.run([tool, "--quiet", "--ignore-time", "--exclude", r"\.py$", str(VENVS)], check=False)


def one_per_family(matrix: Matrix) -> list[Framework]:
    """The first framework of each family in matrix.yaml's order: building theirs builds every environment."""
    first: dict[str, Framework] = {}
    for fw in matrix.frameworks.values():
        first.setdefault(fw.family, fw)
    return list(first.values())


def main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m scripts.launch.venvs", description=__doc__.split("\n")[0])
    ap.add_argument(
        "frameworks",
        nargs="*",
        help="framework ids (matrix.yaml); none: one of each family, so every environment matrix.yaml declares",
    )
    ap.add_argument(
        "--keep-going",
        action="store_true",
        help="build every environment that can be built; exit 0 where the others only lack something "
        "this host does not have (an interpreter, a system package), which is named",
    )
    ap.add_argument(
        "--no-system-packages", action="store_true", help="install no Debian package (NO_SYSTEM_PACKAGES=1)"
    )
    args = ap.parse_args(argv)
    try:
        matrix = load()
        unknown = [fid for fid in args.frameworks if fid not in matrix.frameworks]
        if unknown:
            raise MatrixError(
                f"unknown framework {unknown[0]!r}; declared in matrix.yaml: {', '.join(matrix.frameworks)}"
            )
        frameworks = [matrix.frameworks[fid] for fid in args.frameworks] or one_per_family(matrix)
        absent = prepare_system(frameworks, syspackages.refusal(args.no_system_packages))
        for fw in frameworks:
            try:
                if fw.id in absent:
                    raise EnvError(absent[fw.id])
                print(f"{fw.id}: {ensure(fw)}")
            except EnvError as e:
                if not args.keep_going:
                    raise
                absent[fw.id] = str(e)
                print(f"{fw.id}: not built: {e}", file=sys.stderr)
        share_identical_files()
    except (MatrixError, EnvError, EnvBuildError, syspackages.SystemPackageError) as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    if absent:
        print(f"not built, for want of what this host lacks (their tests skip): {', '.join(absent)}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
