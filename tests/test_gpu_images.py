"""GPU images: what a variant declares (CUDA, cuDNN, kernel architectures) is what its pins install and what its built
image reports. The checks that need no network or engine run everywhere; CI also builds PyTorch's CUDA 13.0 image, its
cuDNN-upgrade sibling and the legacy Caffe2 CUDA 10.2 image, then reads what they carry (no GPU needed). The
resolution of every GPU variant's pins against PyPI is tests/test_gpu_wheels.py: it needs no engine, so it runs beside
the builds on the other worker."""

import json
import re
import subprocess

import pytest
from conftest import IN_CI, ROOT

from scripts.launch import images
from scripts.launch.compose import check_engine, docker_cli
from scripts.launch.executors import ExecutorError
from scripts.plan.matrix import load

# One pytest-xdist worker runs all of these (`make test` runs two): builds share the wheelhouse and BuildKit cache.
pytestmark = pytest.mark.xdist_group("docker-build")

RUNTIME = re.compile(r"nvidia-cuda-runtime(-cu\d+)?$")
CUDNN = re.compile(r"nvidia-cudnn-cu\d+$")
# GPU wheels that bundle their CUDA (no NVIDIA runtime wheels to pin): only the driver comes from the host.
BUNDLED = {("cntk", "gpu"): "cntk-gpu", ("caffe2", "cu102"): "torch==1.8.1"}
BUILT = {("pytorch", "cu130"), ("pytorch", "cu130-cudnn928")}


def gpu_variants():
    matrix = load()
    seen = {}
    for fw in matrix.frameworks.values():
        for v in fw.variants.values():
            if v.device == "gpu":
                seen[fw.family, v.name] = v
    return seen


def pins(path):
    """{name: version} of the == pins in a requirements file (comments and options left out)."""
    found = {}
    for line in (ROOT / path).read_text().splitlines():
        spec = line.split("#")[0].strip()
        if "==" in spec and not spec.startswith("-"):
            name, version = spec.split("==")
            found[re.sub(r"\[.*\]", "", name).strip().lower()] = version.strip()
    return found


def matches(declared, versions):
    return sorted(declared) == sorted(
        {d for d in declared for v in versions if v == d or v.startswith(d + ".")}
    ) and all(any(v == d or v.startswith(d + ".") for d in declared) for v in versions)


@pytest.mark.unit
@pytest.mark.parametrize("key", sorted(gpu_variants()), ids="-".join)
def test_declared_cuda_and_cudnn_are_the_pinned_wheels(key):
    variant = gpu_variants()[key]
    pinned = pins(variant.requirements)
    runtimes = [v for n, v in pinned.items() if RUNTIME.match(n)]
    cudnns = [v for n, v in pinned.items() if CUDNN.match(n)]
    if variant.parent:
        runtimes = runtimes or [
            v for n, v in pins(gpu_variants()[key[0], variant.parent].requirements).items() if RUNTIME.match(n)
        ]
    if key in BUNDLED:
        assert not runtimes, f"{key} is listed as bundling its CUDA but pins NVIDIA's runtime wheel"
        return
    assert runtimes, f"{variant.requirements} pins no nvidia-cuda-runtime wheel: state the CUDA the variant ships"
    assert matches(variant.cuda, runtimes), (variant.cuda, runtimes)
    assert matches(variant.cudnn, cudnns), (variant.cudnn, cudnns)


@pytest.mark.unit
def test_every_gpu_variant_builds_from_the_local_base_image():
    # bullseye for Theano alone: its GPU backend (libgpuarray, pygpu) comes from Debian, and bookworm dropped it
    bases = {key: v.base_image for key, v in gpu_variants().items()}
    assert {b for key, b in bases.items() if key[0] != "theano"} == {"rosetta/debian:bookworm"}
    assert bases["theano", "cu118"] == "rosetta/debian:bullseye"


@pytest.mark.unit
def test_pytorch_offers_two_cuda_builds_and_a_cudnn_only_upgrade():
    pytorch = load().frameworks["pytorch"].variants
    gpu = {n: v for n, v in pytorch.items() if v.device == "gpu"}
    assert len({v.cuda for v in gpu.values()}) >= 2
    sibling = next(v for v in gpu.values() if v.parent)
    parent = gpu[sibling.parent]
    assert sibling.cuda == parent.cuda and sibling.cudnn != parent.cudnn
    assert sibling.cudnn[0].split(".")[0] == parent.cudnn[0].split(".")[0]  # same cuDNN major: ABI-compatible
    assert set(pins(sibling.requirements)) == {"nvidia-cudnn-cu13"}  # it swaps cuDNN and nothing else


CU130 = load().frameworks["pytorch"].variants["cu130"]
REPORT = {
    "frameworks": {"torch": "2.14.1"},
    "cuda": ["13.0.96"],
    "cudnn": ["9.24.0.43"],
    "nccl": ["2.30.7"],
    "kernels": {"torch": {"library": "libtorch_cuda.so", "gpu_archs": list(CU130.gpu_archs), "ptx": []}},
    "gpu_archs": list(CU130.gpu_archs),
    "ptx": [],
    "min_driver": "580.65.06",
}


@pytest.mark.unit
def test_an_image_that_carries_what_it_declares_passes():
    assert images.mismatches(CU130, REPORT) == []
    cpu = load().frameworks["pytorch"].variants["cpu"]
    assert images.mismatches(cpu, REPORT) == []  # the CPU image may carry CUDA: it declares nothing


@pytest.mark.unit
@pytest.mark.parametrize(
    "change, named",
    [
        ({"cuda": ["12.8.90"]}, "cuda"),
        ({"cudnn": []}, "cudnn"),  # a GPU image that lost its cuDNN wheel
        ({"cudnn": ["9.24.0.43", "9.28.1.4"]}, "cudnn"),  # two cuDNNs where one is declared
        ({"gpu_archs": ["sm_80", "sm_90"]}, "gpu_archs"),
        ({"ptx": ["compute_120"]}, "ptx"),
    ],
)
def test_an_image_that_differs_from_its_declaration_is_named(change, named):
    problems = images.mismatches(CU130, {**REPORT, **change})
    assert len(problems) == 1 and problems[0].startswith(named)


@pytest.mark.unit
def test_a_child_variant_is_built_after_its_parent_and_the_gpu_alias_is_the_first_gpu_variant():
    matrix = load()
    pairs = images.wanted(matrix, "full", "pytorch", "cu130-cudnn928")
    assert [v.name for _, v in pairs] == ["cu130", "cu130-cudnn928"]
    assert images.default_gpu_variant(matrix, "pytorch") == "cu130"
    assert images.default_gpu_variant(matrix, "theano") == "cu118"
    assert images.default_gpu_variant(matrix, "cntk") == "gpu"


@pytest.mark.unit
def test_a_variant_names_its_own_dockerfile_and_the_others_keep_their_familys():
    """Theano's GPU image is Debian's pygpu on bullseye (docker/theano/gpu.Dockerfile); its CPU image stays on pyenv's
    Python 3.7 (docker/pyenv.Dockerfile), and every variant without the key keeps the family's usual Dockerfile."""
    theano = load().frameworks["keras2-theano"].variants
    assert images.dockerfile("theano", theano["cu118"]) == ROOT / "docker" / "theano" / "gpu.Dockerfile"
    assert images.dockerfile("theano", theano["cpu"]) == ROOT / "docker" / "pyenv.Dockerfile"
    assert not images.needs_pyenv(theano["cu118"])  # bullseye's own python3 (3.9)
    assert (
        images.dockerfile("julia-knet", load().frameworks["julia-knet"].variants["cpu"])
        == ROOT / "docker" / "julia-knet" / "Dockerfile"
    )
    assert images.dockerfile("pytorch", CU130) == ROOT / "docker" / "Dockerfile"


@pytest.fixture(scope="module")
def engine():
    try:
        docker = docker_cli()
        check_engine(docker)
        return docker
    except ExecutorError as e:
        if IN_CI:
            pytest.fail(f"CI must have a Docker engine: {e}")
        pytest.skip(str(e))


def inspect(docker, tag):
    return json.loads(
        subprocess.run(
            [docker, "run", "--rm", "--network", "none", tag, "--inspect"], check=True, capture_output=True, text=True
        ).stdout
    )


@pytest.mark.network
def test_gpu_images_build_here_and_report_their_cuda_cudnn_and_architectures(engine, gpu_images_removed_after):
    """PyTorch's CUDA 13.0 image, its cuDNN-only sibling and Caffe2's CUDA 10.2 image build from the local Debian
    base with no registry; `make images` itself refuses an image whose report differs from matrix.yaml."""
    assert images.main(["--framework", "pytorch", "--variant", "cu130-cudnn928"]) == 0  # builds cu130 first
    assert images.main(["--framework", "caffe2", "--variant", "cu102"]) == 0
    cu130, sibling, caffe2 = (
        inspect(engine, t) for t in ("rosetta/pytorch:cu130", "rosetta/pytorch:cu130-cudnn928", "rosetta/caffe2:cu102")
    )
    variants = load().frameworks["pytorch"].variants
    assert cu130["cuda"] == sibling["cuda"] and cu130["cuda"][0].startswith("13.0.")
    assert cu130["cudnn"] != sibling["cudnn"]
    assert cu130["cudnn"][0].startswith(variants["cu130"].cudnn[0] + ".")
    assert sibling["cudnn"][0].startswith(variants["cu130-cudnn928"].cudnn[0] + ".")
    assert cu130["gpu_archs"] == list(variants["cu130"].gpu_archs) == sibling["gpu_archs"]
    assert caffe2["cuda"] == ["10.2"] and caffe2["gpu_archs"] == ["sm_37", "sm_50", "sm_60", "sm_70"]
    assert caffe2["frameworks"]["torch"] == "1.8.1"
    gpu = json.loads(
        subprocess.run(
            [engine, "image", "inspect", "rosetta/pytorch:gpu", "rosetta/pytorch:cu130"],
            check=True,
            capture_output=True,
            text=True,
        ).stdout
    )
    assert gpu[0]["Id"] == gpu[1]["Id"]  # `make setup`'s rosetta/FAMILY:gpu is the first GPU variant


@pytest.fixture
def gpu_images_removed_after(engine):
    """The GPU images and their dangling build cache are gone once their test has read them:
    nothing else in the suite runs them, and CI's disk is shared with every other image and environment."""
    yield
    tags = [
        "rosetta/pytorch:cu130-cudnn928",
        "rosetta/pytorch:cu130",
        "rosetta/pytorch:gpu",
        "rosetta/caffe2:cu102",
        "rosetta/caffe2:gpu",
    ]
    subprocess.run([engine, "image", "rm", "--force", *tags], capture_output=True)
    subprocess.run([engine, "builder", "prune", "--force"], capture_output=True)  # dangling cache only
