"""Every GPU variant's pins resolve from PyPI, for its image's Python and glibc, to the CUDA runtime and cuDNN the
variant declares (tests/test_gpu_images.py holds the declarations' checks and the CUDA image builds). Only pip and
the package index: no engine, so `make test-network` runs it on one worker while the other builds the images."""

import json
import subprocess
import sys
from dataclasses import replace

import pytest
from conftest import ROOT
from test_gpu_images import BUILT, BUNDLED, CUDNN, RUNTIME, gpu_variants, matches

from scripts.launch import wheelhouse

# GPU variants whose framework wheel comes from the framework's own package index, never PyPI (the file's
# --extra-index-url): resolving them needs that index, which our machines cannot reach; the unit tier still checks
# their declared CUDA and cuDNN against their pins (tests/test_gpu_images.py).
OWN_INDEX = {("paddle", "cu126"): "https://www.paddlepaddle.org.cn/packages/stable/cu126/"}


def resolve(variant):
    """pip's resolution of a variant's pins for the image's Python and glibc (metadata only: nothing downloaded
    but what PyPI serves as metadata): {name: version}."""
    files = [variant.requirements]
    tags = wheelhouse.platform_tags(wheelhouse.glibc_minor(variant.glibc), "x86_64")
    # --no-cache-dir: older wheels have no separate metadata on PyPI, so pip fetches them whole (1–4 GB a variant)
    # into a temporary folder it removes; the cache would keep a second copy of each on CI's disk.
    argv = [
        sys.executable,
        "-m",
        "pip",
        "install",
        "--dry-run",
        "--ignore-installed",
        "--quiet",
        "--no-cache-dir",
        "--report",
        "-",
        "--python-version",
        variant.python,
        "--implementation",
        "cp",
        "--only-binary",
        ":all:",
        "--target",
        "/nonexistent",
        *(a for t in tags for a in ("--platform", t)),
        *(["--no-deps"] if variant.parent else []),
        *(a for f in files for a in ("-r", str(ROOT / f))),
    ]
    out = subprocess.run(argv, capture_output=True, text=True, timeout=900)
    assert out.returncode == 0, f"{variant.requirements} does not resolve: {out.stderr[-1500:]}"
    return {i["metadata"]["name"].lower(): i["metadata"]["version"] for i in json.loads(out.stdout)["install"]}


@pytest.mark.unit
def test_an_own_index_variant_names_its_index_in_its_requirements():
    """A variant left out of the PyPI resolution for its own index says so where pip reads it, so an image build
    that reaches the index installs from there (and one that does not fails naming it)."""
    for key, index in OWN_INDEX.items():
        variant = gpu_variants()[key]
        assert f"--extra-index-url {index}" in (ROOT / variant.requirements).read_text().splitlines(), key


@pytest.mark.network
def test_every_gpu_variant_resolves_from_pypi_to_what_it_declares():
    """What `make images PROFILE=full` downloads: each GPU variant's pins resolve to wheels for its image's Python,
    and the resolved CUDA runtime and cuDNN are the declared ones (sdist pins are built on the host: left out)."""
    # The bundling legacy wheels (CNTK's Python 3.6, Caffe2's 3.8) are left out: pip here cannot judge those old
    # Pythons' markers, and their images build in CI from the same pins (Caffe2) or the build says (CNTK).
    # PyTorch's cu130 and its cuDNN sibling are built (and inspected) by the test below.
    # Paddle's CUDA builds are on Paddle's own index alone (docker/paddle/requirements-cuda.txt): not a PyPI question.
    wheel_route = {
        k: v for k, v in gpu_variants().items() if k not in BUNDLED and k not in BUILT and k not in OWN_INDEX
    }
    variants = {k: v for k, v in wheel_route.items() if not wheelhouse.sdist_requirements(ROOT / v.requirements)}
    variants.update(
        {
            k: replace(v, requirements=str(sdist_free(v)))
            for k, v in wheel_route.items()
            if wheelhouse.sdist_requirements(ROOT / v.requirements)
        }
    )
    # One at a time: each resolution holds its variant's wheels on disk until it ends (CI ran out of disk with four).
    resolved = {key: resolve(variant) for key, variant in variants.items()}
    for key, versions in resolved.items():
        variant = gpu_variants()[key]
        if variant.parent:
            continue
        runtimes = [v for n, v in versions.items() if RUNTIME.match(n)]
        cudnns = [v for n, v in versions.items() if CUDNN.match(n)]
        assert matches(variant.cuda, runtimes) and matches(variant.cudnn, cudnns), (key, runtimes, cudnns)


def sdist_free(variant):
    """A copy of the variant's requirements without its `# sdist` pins (pure-Python packages built on the host)."""
    path = ROOT / ".wheelhouse" / f"resolve-{variant.name}-{variant.requirements.replace('/', '-')}"
    path.parent.mkdir(exist_ok=True)
    lines = [line for line in (ROOT / variant.requirements).read_text().splitlines() if "# sdist" not in line]
    path.write_text("\n".join(lines) + "\n")
    return path.relative_to(ROOT)
