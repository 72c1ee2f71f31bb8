"""What an environment carries for the GPU, read without a GPU and without importing any framework.

    python -m runners --inspect        (in an image: `docker run --rm IMAGE --inspect`)

- frameworks: the installed versions of the framework distributions (torch, tensorflow, jaxlib, mxnet-cu112, …).
- cuda, cudnn, nccl: the versions of NVIDIA's runtime wheels (nvidia-cuda-runtime*, nvidia-cudnn-cu*, nvidia-nccl-cu*)
  or, for wheels that bundle them (torch 1.8.1, cntk-gpu), read from the bundled libraries' file names.
- gpu_archs / ptx: the GPU architectures the frameworks' own kernels were compiled for, read from the `.nv_fatbin`
  section of their shared libraries (what `cuobjdump --list-elf` lists). Importing is no option: an MXNet CUDA build
  links the driver's libcuda.so.1 and cannot even be imported on a host without one.
- min_driver: the oldest NVIDIA driver that runs the newest CUDA runtime here (CUDA's minor-version compatibility).

The result is cached in the environment (`sys.prefix/rosetta-build.json`, written at image build time), so a cell
pays for the scan once per environment, not once per cell.
"""

import collections
import json
import re
import struct
import sys
from pathlib import Path
from typing import Any, BinaryIO, Dict, Iterable, Iterator, List, Mapping, Optional, Tuple, Union

CACHE = Path(sys.prefix) / "rosetta-build.json"

# Distributions whose kernels decide which GPUs an environment can use. NVIDIA's own libraries (cuBLAS, cuDNN, …)
# carry kernels for every architecture of their CUDA release and are left out of the scan.
FRAMEWORK_DISTS = (
    "torch",
    "tensorflow",
    "tensorflow-cpu",
    "keras",
    "jax",
    "jaxlib",
    "jax-cuda12-plugin",
    "jax-cuda13-plugin",
    "jax-cuda12-pjrt",
    "jax-cuda13-pjrt",
    "flax",
    "mxnet",
    "mxnet-cu112",
    "mxnet-cu117",
    "chainer",
    "cupy-cuda11x",
    "cupy-cuda12x",
    "cntk",
    "cntk-gpu",
    "theano",
    "lasagne",
    "pygpu",
)
VENDOR_LIBS = re.compile(
    r"lib(cudart|cudnn|cublas|cufft|curand|cusolver|cusparse|nccl|nvrtc|nvjitlink|nvToolsExt|"
    r"cupti|nvshmem|cufile|mkl|iomp)"
)
# Runtime wheels per library, newest naming first (CUDA 13 dropped the -cuXX suffix from most of them).
RUNTIME_WHEELS = {
    "cuda": ("nvidia-cuda-runtime", "nvidia-cuda-runtime-cu12", "nvidia-cuda-runtime-cu11"),
    "cudnn": ("nvidia-cudnn-cu13", "nvidia-cudnn-cu12", "nvidia-cudnn-cu11"),
    "nccl": ("nvidia-nccl-cu13", "nvidia-nccl-cu12", "nvidia-nccl-cu11"),
}
BUNDLED = {"cuda": "libcudart", "cudnn": "libcudnn", "nccl": "libnccl"}

# Oldest Linux driver per CUDA major version under minor-version compatibility (CUDA's release notes, table 2/3);
# before CUDA 11 every minor release needed its own driver. JIT-compiling PTX needs the driver of the exact release.
MIN_DRIVER = {
    "13": "580.65.06",
    "12": "525.60.13",
    "11": "450.80.02",
    "10.2": "440.33",
    "10.1": "418.39",
    "10.0": "410.48",
    "9.2": "396.26",
    "9.0": "384.81",
}
Dists = Mapping[str, Tuple[str, Path]]  # distributions(): {normalised name: (version, its .dist-info folder)}
FATBIN_MAGIC = 0xBA55ED50
ELF, PTX = 2, 1


def elf_sections(f: BinaryIO) -> Iterator[Tuple[str, int, int]]:
    """(name, file offset, size) of each section of a 64-bit little-endian ELF file."""
    head = f.read(64)
    if head[:4] != b"\x7fELF" or head[4] != 2:
        return
    (shoff,) = struct.unpack_from("<Q", head, 0x28)
    entsize, count, names_index = struct.unpack_from("<HHH", head, 0x3A)
    f.seek(shoff)
    raw = f.read(entsize * count)
    headers = [struct.unpack_from("<IIQQQQ", raw, i * entsize) for i in range(count)]
    f.seek(headers[names_index][4])
    names = f.read(headers[names_index][5])
    for name_at, _, _, _, offset, size in headers:
        yield names[name_at : names.index(b"\0", name_at)].decode(), offset, size


def fatbin_entries(path: Union[str, Path]) -> "collections.Counter[Tuple[int, int]]":
    """Counter of (kind, sm) over the kernels in `path`'s .nv_fatbin section: kind 2 is a compiled cubin (ELF), 1 is
    PTX that the driver can JIT-compile for newer GPUs; sm 86 means compute capability 8.6. Only the entry headers are
    read (offsets per NVIDIA's fatbinary.h: kind u16, version u16, header size u32, payload size u64, …, sm u32 at 28),
    so a 1 GB library is scanned in well under a second."""
    counts = collections.Counter()  # type: collections.Counter[Tuple[int, int]]
    with open(path, "rb") as f:
        for name, offset, size in list(elf_sections(f)):
            if name != ".nv_fatbin":
                continue
            pos, end = offset, offset + size
            while pos + 16 <= end:  # fat binaries follow each other, 8-byte aligned
                f.seek(pos)
                magic, _, header_size, fat_size = struct.unpack("<IHHQ", f.read(16))
                if magic != FATBIN_MAGIC:
                    pos += 8
                    continue
                entry, last = pos + header_size, pos + header_size + fat_size
                while entry + 32 <= last:
                    f.seek(entry)
                    head = f.read(32)
                    kind, _, entry_header, payload = struct.unpack_from("<HHIQ", head)
                    counts[kind, struct.unpack_from("<I", head, 28)[0]] += 1
                    entry += entry_header + payload
                pos = last
    return counts


def kernel_archs(counts: Mapping[Tuple[int, int], int]) -> Tuple[List[str], List[str]]:
    """(['sm_70', …], ['compute_80', …]) a library was built for: the architectures that carry at least half as many
    kernels as its best-covered one. A handful of kernels for another architecture (a bundled library's specialised
    kernels) does not make the library run there."""

    def pick(kind: int, prefix: str) -> List[str]:
        per_arch = {sm: n for (k, sm), n in counts.items() if k == kind}
        top = max(per_arch.values(), default=0)
        return [f"{prefix}{sm}" for sm in sorted(per_arch) if per_arch[sm] * 2 >= top]

    return pick(ELF, "sm_"), pick(PTX, "compute_")


def distributions() -> Dict[str, Tuple[str, Path]]:
    """{normalised name: (version, its .dist-info folder)} of what is installed on sys.path. Read from the folders
    themselves: importlib.metadata does not exist on the Python 3.6 and 3.7 of the legacy stacks."""
    found = {}  # type: Dict[str, Tuple[str, Path]]
    for entry in map(Path, sys.path):
        for info in entry.glob("*.dist-info") if entry.is_dir() else ():
            name, _, version = info.name[: -len(".dist-info")].partition("-")
            found.setdefault(re.sub(r"[-_.]+", "-", name).lower(), (version, info))
    return found


def arch_number(arch: str) -> int:
    """'sm_86' or 'compute_86' -> 86."""
    return int(arch.rsplit("_", 1)[1])


def runs(gpu_archs: Iterable[str], ptx: Iterable[str], arch: str) -> bool:
    """Whether kernels compiled for `gpu_archs` (cubins) and `ptx` run on a GPU of architecture `arch` ('sm_86'): a
    cubin runs on GPUs of its major version with an equal or higher minor (sm_80 on sm_86 and sm_89, not on sm_90);
    PTX is JIT-compiled by the driver for any GPU at least as new."""
    major, minor = divmod(arch_number(arch), 10)
    if any(divmod(arch_number(a), 10)[0] == major and divmod(arch_number(a), 10)[1] <= minor for a in gpu_archs):
        return True
    return any(arch_number(p) <= arch_number(arch) for p in ptx)


def installed(names: Iterable[str], dists: Optional[Dists] = None) -> Dict[str, str]:
    """{distribution: version} for those of `names` installed here."""
    dists = distributions() if dists is None else dists
    return {name: dists[name][0] for name in names if name in dists}


def files(dist: str, dists: Dists) -> List[Path]:
    """The installed files of `dist`, from its RECORD."""
    info = dists[dist][1]
    try:
        lines = (info / "RECORD").read_text().splitlines()
    except OSError:
        return []
    return [info.parent / line.split(",")[0] for line in lines if line]


def native_libraries(dist: str, dists: Dists) -> List[Path]:
    """The framework's own shared libraries (not the vendor ones it bundles) inside distribution `dist`."""
    return [f for f in files(dist, dists) if ".so" in f.name and not VENDOR_LIBS.match(f.name)]


def bundled_version(dist: str, stem: str, dists: Dists) -> Optional[str]:
    """The version in the file name of a vendor library a wheel bundles: libcudart-80664282.so.10.2 -> '10.2',
    libcudnn.so.7.6.5 -> '7.6.5'."""
    for f in files(dist, dists):
        match = re.match(stem + r"(?:-[0-9a-f]+)?\.so\.([0-9.]+)$", f.name)
        if match:
            return match.group(1)
    return None


def min_driver(cuda: Optional[str]) -> Optional[str]:
    """The oldest driver that runs CUDA runtime `cuda` ('13.0.96', '10.2'), or None if unknown."""
    if not cuda:
        return None
    major, minor = (cuda.split(".") + ["0"])[:2]
    return MIN_DRIVER.get(major) or MIN_DRIVER.get(f"{major}.{minor}")


def inspect() -> Dict[str, Any]:
    """The environment's GPU build facts (see the module docstring); no framework is imported."""
    dists = distributions()
    frameworks = installed(FRAMEWORK_DISTS, dists)
    report = {"frameworks": frameworks}  # type: Dict[str, Any]
    for lib, wheels in RUNTIME_WHEELS.items():
        versions = list(installed(wheels, dists).values())
        versions += [v for v in (bundled_version(d, BUNDLED[lib], dists) for d in frameworks) if v]
        report[lib] = sorted(set(versions), reverse=True)
    kernels = {}  # type: Dict[str, Dict[str, Any]]
    for dist in frameworks:
        scanned = [(so, fatbin_entries(so)) for so in native_libraries(dist, dists) if so.is_file()]
        scanned = [(so, counts) for so, counts in scanned if counts]
        if scanned:  # the framework's main kernel library (the most kernels) decides where it runs
            library, counts = max(scanned, key=lambda pair: sum(pair[1].values()))
            sm, ptx = kernel_archs(counts)
            kernels[dist] = {"library": library.name, "gpu_archs": sm, "ptx": ptx}
    report["kernels"] = kernels
    # The image runs on an architecture where every framework in it runs (the Keras image holds three): from a cubin
    # of the same major version, or by JIT-compiling its PTX.
    candidates = sorted({a for k in kernels.values() for a in k["gpu_archs"]}, key=arch_number)
    report["gpu_archs"] = [a for a in candidates if all(runs(k["gpu_archs"], k["ptx"], a) for k in kernels.values())]
    ptx_sets = [set(k["ptx"]) for k in kernels.values()]
    report["ptx"] = sorted(set.intersection(*ptx_sets), key=arch_number) if ptx_sets else []
    report["min_driver"] = min_driver(report["cuda"][0] if report["cuda"] else None)
    return report


def cached() -> Dict[str, Any]:
    """inspect(), from the environment's cache file when it is newer than every installed distribution."""
    try:
        if CACHE.stat().st_mtime >= max(info.stat().st_mtime for _, info in distributions().values()):
            return json.loads(CACHE.read_text())
    except (OSError, ValueError):
        pass
    report = inspect()
    try:
        CACHE.write_text(json.dumps(report, indent=1) + "\n")
    except OSError:
        pass  # a read-only environment: scan again next time
    return report
