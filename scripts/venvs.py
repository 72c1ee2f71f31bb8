"""Per-framework virtual environments for the local executor, built from the same pinned requirements as the images.

    python -m scripts.venvs pytorch [tensorflow …]     # build (or confirm) .venv/FAMILY for each framework

An environment is rebuilt when its requirements file changes (a stamp holds the file's hash).
"""
import argparse
import hashlib
import os
import shutil
import subprocess
import sys
from pathlib import Path

from scripts.matrix import ROOT, MatrixError, load

VENVS = ROOT / ".venv"


class EnvError(Exception):
    """An environment that cannot be built here; the message says what is missing and what to do."""


def venv_dir(framework):
    return VENVS / framework.family


def python_of(framework):
    return venv_dir(framework) / "bin" / "python"


def local_requirements(framework):
    """The requirements of the framework's CPU variant (else its first): what a venv on this host should mirror."""
    variants = framework.variants.values()
    return ROOT / next((v for v in variants if v.device == "cpu"), next(iter(variants))).requirements


def find_interpreter(version):
    """`pythonX.Y` on PATH first, then pyenv's; an EnvError naming both places if neither has it."""
    found = shutil.which(f"python{version}")
    if found and subprocess.run([found, "-c", ""], capture_output=True).returncode == 0:
        return found               # (a pyenv shim for a version that is installed but not selected exits 127)
    try:
        root = subprocess.run(["pyenv", "root"], capture_output=True, text=True, check=True).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        root = os.path.expanduser("~/.pyenv")
    for candidate in sorted(Path(root, "versions").glob(f"{version}.*/bin/python{version}"), reverse=True):
        return str(candidate)
    raise EnvError(f"no python{version} on PATH or under pyenv ({root}); install Python {version} or run this "
                   f"framework in its container image (`make images`)")


def post_install_script(requirements):
    """docker/FAMILY/post_install.py: what a family needs after pip (CNTK's OpenMPI links, Lasagne's Theano shim),
    run by the environment's own python here and in the image alike; None where the family needs nothing."""
    script = requirements.with_name("post_install.py")
    return script if script.exists() else None


def stamp_of(requirements):
    script = post_install_script(requirements)
    extra = script.read_bytes() if script else b""
    return hashlib.sha256(requirements.read_bytes() + extra).hexdigest()


# The pip that Python 3.6-3.8's ensurepip bundles predates the wheel tags and metadata of today's index; these are the
# newest releases that still run on each (pip 22 dropped 3.6, pip 24 dropped 3.7).
BOOTSTRAP = {"3.6": ["pip<22", "setuptools<60", "wheel<0.38"], "3.7": ["pip<24", "setuptools<69", "wheel<0.43"],
             "3.8": ["pip<25", "setuptools<76", "wheel<0.46"]}


def build_env(requirements):
    """pip's environment: a family whose pins include sdists (Chainer) keeps the constraints their builds need in
    build-constraints.txt beside its requirements; PIP_CONSTRAINT reaches pip's isolated build environments too."""
    constraints = requirements.with_name("build-constraints.txt")
    return {**os.environ, "PIP_CONSTRAINT": str(constraints)} if constraints.exists() else None


def ensure(framework):
    """Build the framework's venv unless it is already built from the current requirements; return its python."""
    requirements = local_requirements(framework)
    target, stamp = venv_dir(framework), venv_dir(framework) / ".requirements.sha256"
    if stamp.exists() and stamp.read_text() == stamp_of(requirements) and python_of(framework).exists():
        return python_of(framework)
    interpreter = find_interpreter(framework.python)
    print(f"building {target} with Python {framework.python} from {requirements.relative_to(ROOT)} …", flush=True)
    shutil.rmtree(target, ignore_errors=True)
    subprocess.run([interpreter, "-m", "venv", str(target)], check=True)
    pip = [str(python_of(framework)), "-m", "pip", "install", "--disable-pip-version-check", "-q"]
    if framework.python in BOOTSTRAP:
        subprocess.run(pip + ["-U", *BOOTSTRAP[framework.python]], check=True)
    subprocess.run(pip + ["-r", str(requirements)], check=True, env=build_env(requirements))
    if post_install_script(requirements):
        subprocess.run([str(python_of(framework)), str(post_install_script(requirements))], check=True)
    stamp.write_text(stamp_of(requirements))
    return python_of(framework)


def main(argv=None):
    ap = argparse.ArgumentParser(prog="python -m scripts.venvs", description=__doc__.split("\n")[0])
    ap.add_argument("frameworks", nargs="+")
    args = ap.parse_args(argv)
    try:
        matrix = load()
        for fid in args.frameworks:
            if fid not in matrix.frameworks:
                raise MatrixError(f"unknown framework {fid!r}; declared in matrix.yaml: {', '.join(matrix.frameworks)}")
            print(f"{fid}: {ensure(matrix.frameworks[fid])}")
    except (MatrixError, EnvError, subprocess.CalledProcessError) as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
