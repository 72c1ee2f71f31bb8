"""Download an image's pinned requirements into a host folder (a "wheelhouse").

Images then install with `pip install --no-index --find-links WHEELHOUSE`, so a build needs no network and no TLS
inside the container (our machines re-sign HTTPS, which pip in a build rejects), and air-gapped GPU clusters can copy
the folder in. pip download skips files the folder already has, so a second run only re-resolves.

    python -m scripts.launch.wheelhouse --requirements docker/pytorch/requirements.txt \
        --python-version 3.11 --dest .wheelhouse/pytorch-cpu

The wheels must match the image's Python, not the host's: Debian 12 ships 3.11, Ubuntu 24.04 (the CUDA bases) 3.12.

pip checks each download against the hash the index publishes; the folder then outlives the download, so it keeps
the SHA-256 of every wheel as first downloaded (DEST/SHA256SUMS, `sha256sum -c` format) and refuses to go on when a
wheel it already holds has changed since: a build never installs a wheel swapped in the folder between builds.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
from pathlib import Path

from shared.datasets import file_digest

# The image's C library decides which manylinux wheels run there: Debian 12 has glibc 2.36, Ubuntu 24.04 2.39.
DEFAULT_GLIBC = "2.36"
LEGACY_MANYLINUX = {5: "manylinux1", 12: "manylinux2010", 17: "manylinux2014"}  # PEP 600 aliases


def glibc_minor(text: str) -> int:
    """argparse type: "2.36" -> 36."""
    major, _, minor = text.partition(".")
    if major != "2" or not minor.isdigit():
        raise argparse.ArgumentTypeError(f"expected a glibc version like 2.36, got {text!r}")
    return int(minor)


def platform_tags(minor: int, arch: str) -> list[str]:
    """Every manylinux tag glibc 2.MINOR runs, newest first: pip 23 does not expand one --platform into older tags."""
    tags = []
    for m in range(minor, 4, -1):
        tags.append(f"manylinux_2_{m}_{arch}")
        if m in LEGACY_MANYLINUX:
            tags.append(f"{LEGACY_MANYLINUX[m]}_{arch}")
    return tags


def download_command(
    requirements: Path, dest: Path, python_version: str, platforms: list[str], no_deps: bool = False
) -> list[str]:
    """The pip download call; binary wheels only, since a foreign --python-version cannot build sdists."""
    return [
        sys.executable,
        "-m",
        "pip",
        "download",
        "--requirement",
        str(requirements),
        "--dest",
        str(dest),
        "--find-links",
        str(dest),  # wheels already here count as candidates, so nothing is fetched twice
        "--python-version",
        python_version,
        *(arg for tag in platforms for arg in ("--platform", tag)),
        "--implementation",
        "cp",
        "--only-binary",
        ":all:",
        "--progress-bar",
        "off",
        *(["--no-deps"] if no_deps else []),
    ]


def sdist_requirements(requirements: Path) -> list[str]:
    """Pins marked `# sdist` in the requirements: pure-Python packages published only as source (Chainer 7), which
    `--only-binary` cannot download. They are built into py3 wheels on the host first, so the download finds them."""
    lines = (line.partition("#") for line in requirements.read_text().splitlines())
    return [pin.strip() for pin, _, comment in lines if pin.strip() and comment.strip().startswith("sdist")]


def build_sdists(requirements: Path, dest: Path) -> int:
    """`pip wheel` the sdist pins into dest, with build-constraints.txt (beside the requirements) applied to the
    isolated build environments; 0 when there is nothing to build."""
    pins = sdist_requirements(requirements)
    if not pins:
        return 0
    constraints = requirements.with_name("build-constraints.txt")
    env = {**os.environ, "PIP_CONSTRAINT": str(constraints)} if constraints.exists() else None
    return subprocess.run(
        [
            sys.executable,
            "-m",
            "pip",
            "wheel",
            "--no-deps",
            "--wheel-dir",
            str(dest),
            "--find-links",
            str(dest),
            "--progress-bar",
            "off",
            *pins,
        ],
        env=env,
    ).returncode


SUMS = "SHA256SUMS"


def check_sums(dest: Path) -> list[str]:
    """Trust on first use: every wheel in `dest` against DEST/SHA256SUMS; wheels new since are added to it. Returns
    the wheels that changed since their hash was kept (nothing is added then)."""
    sums = dest / SUMS
    known = {}
    if sums.exists():
        for line in sums.read_text().splitlines():
            digest, _, name = line.partition("  ")
            if len(digest) == 64 and name:
                known[name] = digest
    current = {wheel.name: file_digest(wheel, "sha256") for wheel in sorted(dest.glob("*.whl"))}
    changed = [
        f"{name} (SHA-256 {digest}, kept {known[name]})"
        for name, digest in current.items()
        if name in known and known[name] != digest
    ]
    if not changed and current.keys() - known.keys():
        sums.write_text("".join(f"{digest}  {name}\n" for name, digest in sorted({**known, **current}.items())))
    return changed


def folder_size(path: Path) -> int:
    return sum(f.stat().st_size for f in path.iterdir() if f.is_file())


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m scripts.launch.wheelhouse", description=__doc__.split("\n\n")[0])
    parser.add_argument("--requirements", type=Path, required=True, help="pinned requirements file")
    parser.add_argument("--dest", type=Path, required=True, help="wheelhouse folder (created if missing)")
    parser.add_argument("--python-version", default="3.11", help="the image's Python, e.g. 3.11 (default) or 3.12")
    parser.add_argument(
        "--glibc",
        type=glibc_minor,
        default=DEFAULT_GLIBC,
        help=f"the image's glibc (default {DEFAULT_GLIBC}, Debian 12)",
    )
    parser.add_argument("--arch", default="x86_64", help="the image's CPU architecture (default x86_64)")
    parser.add_argument(
        "--no-deps",
        action="store_true",
        help="only the pinned wheels themselves (a variant that swaps one library of its parent)",
    )
    args = parser.parse_args(argv)

    if not args.requirements.is_file():
        parser.error(f"no requirements file at {args.requirements}")
    args.dest.mkdir(parents=True, exist_ok=True)
    if build_sdists(args.requirements, args.dest) != 0:
        print(
            f"wheelhouse: building the sdist pins of {args.requirements} failed; see pip's message above",
            file=sys.stderr,
        )
        return 1
    command = download_command(
        args.requirements, args.dest, args.python_version, platform_tags(args.glibc, args.arch), args.no_deps
    )
    if subprocess.run(command).returncode != 0:
        print(f"wheelhouse: pip download failed for {args.requirements}; see pip's message above", file=sys.stderr)
        return 1
    changed = check_sums(args.dest)
    if changed:
        print(
            f"wheelhouse: {len(changed)} wheel(s) in {args.dest} changed since they were downloaded: "
            f"{'; '.join(changed)}. Nothing was built from them; delete {args.dest} to download them again",
            file=sys.stderr,
        )
        return 1
    wheels = sum(1 for _ in args.dest.glob("*.whl"))
    print(f"wheelhouse: {args.dest} holds {wheels} wheels, {folder_size(args.dest) / 1e9:.2f} GB")
    return 0


if __name__ == "__main__":
    sys.exit(main())
