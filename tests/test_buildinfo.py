"""What an environment carries for the GPU, read without a GPU: the .nv_fatbin scan agrees with what PyTorch itself
says it was compiled for (two wheels, CUDA 13.0 and CUDA 10.2), versions come from NVIDIA's wheels or bundled library
names, and the compatibility rules the pre-flight uses hold."""

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import ROOT

from shared import buildinfo

TORCH_ARCHS = "import torch, json; print(json.dumps(torch._C._cuda_getArchFlags().split()))"
INSPECT = "import json; from shared import buildinfo; print(json.dumps(buildinfo.inspect()))"


def in_venv(name, code):
    python = ROOT / ".venv" / name / "bin" / "python"
    if not python.exists():
        pytest.skip(f"no .venv/{name} (make venvs)")
    out = subprocess.run([str(python), "-c", code], cwd=ROOT, capture_output=True, text=True, check=True)
    return json.loads(out.stdout.strip().splitlines()[-1])


@pytest.mark.framework
@pytest.mark.parametrize("venv, cuda", [("pytorch", "13.0"), ("caffe2", "10.2")])
def test_fatbin_scan_finds_the_architectures_torch_was_built_for(venv, cuda):
    report = in_venv(venv, INSPECT)
    assert report["gpu_archs"] == in_venv(venv, TORCH_ARCHS)
    assert report["kernels"]["torch"]["library"] == "libtorch_cuda.so"
    assert report["cuda"][0] == cuda or report["cuda"][0].startswith(cuda + ".")
    assert report["min_driver"] == buildinfo.min_driver(cuda)


@pytest.mark.framework
def test_pytorch_environment_reports_the_pinned_cudnn_and_nccl():
    report = in_venv("pytorch", INSPECT)
    pins = dict(
        line.split("==")
        for line in (ROOT / "docker/pytorch/requirements.txt").read_text().splitlines()
        if line.startswith("nvidia-")
    )
    assert report["cudnn"] == [pins["nvidia-cudnn-cu13"]] and report["nccl"] == [pins["nvidia-nccl-cu13"]]
    assert report["cuda"] == [pins["nvidia-cuda-runtime"]]


@pytest.mark.framework
def test_an_environment_without_cuda_reports_none():
    report = in_venv("mxnet", INSPECT)  # the CPU wheel
    assert report["frameworks"]["mxnet"] and report["cuda"] == [] and report["gpu_archs"] == []
    assert report["min_driver"] is None


@pytest.mark.unit
def test_a_library_without_kernels_and_a_non_elf_file_scan_empty(tmp_path):
    text = tmp_path / "not-elf.so"
    text.write_text("hello")
    assert not buildinfo.fatbin_entries(text)
    assert not buildinfo.fatbin_entries(Path(sys.executable).resolve())  # an ELF without .nv_fatbin


@pytest.mark.unit
def test_kernel_archs_ignore_a_handful_of_stray_kernels():
    counts = {(2, 75): 475, (2, 80): 475, (2, 89): 1, (1, 90): 400, (1, 80): 3}
    assert buildinfo.kernel_archs(counts) == (["sm_75", "sm_80"], ["compute_90"])


@pytest.mark.unit
@pytest.mark.parametrize(
    "archs, ptx, gpu, expected",
    [
        (["sm_80"], [], "sm_86", True),  # a cubin runs on later minors of its major version …
        (["sm_80"], [], "sm_90", False),  # … never on another major
        (["sm_86"], [], "sm_80", False),  # … nor on an earlier minor
        (["sm_70"], ["compute_90"], "sm_100", True),  # PTX is JIT-compiled for anything newer
        (["sm_70"], ["compute_90"], "sm_80", False),  # … but not for older GPUs
        (["sm_100"], [], "sm_103", True),
        (["sm_120"], [], "sm_100", False),
    ],
)
def test_compatibility_rules(archs, ptx, gpu, expected):
    assert buildinfo.runs(archs, ptx, gpu) is expected


@pytest.mark.unit
def test_min_driver_by_cuda_version():
    assert buildinfo.min_driver("13.0.96") == "580.65.06"
    assert buildinfo.min_driver("12.9.79") == buildinfo.min_driver("12.0") == "525.60.13"
    assert buildinfo.min_driver("10.2") == "440.33" and buildinfo.min_driver("10.0") == "410.48"
    assert buildinfo.min_driver(None) is None


@pytest.mark.unit
def test_cache_is_reused_and_refreshed_when_a_distribution_changes(tmp_path, monkeypatch):
    site = tmp_path / "site"
    info = site / "demo-1.0.dist-info"
    info.mkdir(parents=True)
    (info / "RECORD").write_text("")
    monkeypatch.setattr(buildinfo.sys, "path", [str(site)])
    monkeypatch.setattr(buildinfo, "CACHE", tmp_path / "rosetta-build.json")
    calls = []
    monkeypatch.setattr(buildinfo, "inspect", lambda: calls.append(1) or {"frameworks": {}})
    buildinfo.cached()
    buildinfo.cached()
    assert len(calls) == 1
    os.utime(info, (buildinfo.CACHE.stat().st_mtime + 10,) * 2)  # a reinstall after the scan
    buildinfo.cached()
    assert len(calls) == 2
