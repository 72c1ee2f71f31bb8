"""The `weights` step: torchvision's ImageNet weights for ResNet-50 and DenseNet-121 in the canonical layout.

Downloads each published file once, checks it against the SHA-256 prefix its name carries (torchvision's convention:
`resnet50-11ad3fa6.pth` starts with 11ad3fa6), converts it to the canonical layout of shared/canonical.py and stores
DATA_ROOT/weights/{resnet50,densenet121}.npz plus weights/manifest.json. Runners read them through canonical.load.

    python -m shared.weights --root data/real                          # download (once), check, convert
    python -m shared.weights --root data/real --from densenet121-a639ec97.pth   # a file copied by hand (air-gapped)

No torch here (shared/ stays framework-free): a .pth is read with a restricted unpickler that knows only the few
globals a state dict needs, in all three formats torch.save has written — the zip archive (torch >= 1.6), the pickle
stream that preceded it, and the tar archive of the first releases (torchvision's oldest files may be either).
"""

import argparse
import json
import os
import pickle
import re
import struct
import sys
import tarfile
import tempfile
import urllib.request
import zipfile
from collections import OrderedDict
from pathlib import Path
from typing import IO, TYPE_CHECKING, Any, Callable, Dict, Iterable, Mapping, Optional, Sequence, Tuple, Union

import numpy as np

from shared import canonical
from shared.datasets import DataError, download, file_digest
from shared.record import UMASK, now, write_atomic

if TYPE_CHECKING:  # typing.Literal is 3.8+; shared/ runs on 3.6
    from typing import Literal

SOURCES = {  # torchvision's published ImageNet-1k weights
    "resnet50": "https://download.pytorch.org/models/resnet50-11ad3fa6.pth",  # IMAGENET1K_V2
    "densenet121": "https://download.pytorch.org/models/densenet121-a639ec97.pth",  # IMAGENET1K_V1 (the only one)
}
# torchvision's own loader renames DenseNet's pre-0.4 keys (`denselayer1.norm.1.weight` -> `denselayer1.norm1.weight`).
DENSENET_OLD_KEY = re.compile(
    r"^(.*denselayer\d+\.(?:norm|relu|conv))\.((?:[12])\.(?:weight|bias|running_mean|running_var))$"
)
# Arrays a published file has that the canonical layout does not: the 1000-way ImageNet heads and BN step counters.
DROPPED = re.compile(r"^(fc|classifier)\.(weight|bias)$|\.num_batches_tracked$")


# ---------------------------------------------------------------- reading a .pth without torch

DTYPES = {
    "DoubleStorage": "f8",
    "FloatStorage": "f4",
    "HalfStorage": "f2",
    "LongStorage": "i8",
    "IntStorage": "i4",
    "ShortStorage": "i2",
    "CharStorage": "i1",
    "ByteStorage": "u1",
    "BoolStorage": "?",
    "UntypedStorage": "u1",
}
LEGACY_MAGIC = 0x1950A86A20F9469CFC6C  # torch.serialization.MAGIC_NUMBER, PROTOCOL_VERSION
LEGACY_PROTOCOL = 1001


class StorageType:
    """What `torch.FloatStorage` etc. unpickle to: only their element type matters here."""

    def __init__(self, dtype: Union[str, np.dtype]) -> None:
        self.dtype = np.dtype(dtype)


def _view(storage, offset, size, stride):
    """The tensor torch rebuilds from (storage, offset, size, stride), as a NumPy view that shares the storage."""
    size, stride = tuple(int(n) for n in size), tuple(int(s) for s in stride)
    if len(size) != len(stride) or min(stride, default=0) < 0 or offset < 0:
        raise pickle.UnpicklingError(f"bad tensor geometry: size {size}, stride {stride}, offset {offset}")
    if np.prod(size) and offset + sum((n - 1) * s for n, s in zip(size, stride)) >= len(storage):
        raise pickle.UnpicklingError(f"tensor of size {size} lies outside its storage of {len(storage)} elements")
    return np.lib.stride_tricks.as_strided(storage[offset:], size, [s * storage.itemsize for s in stride])


def _rebuild_tensor(storage, offset, size, stride, *_):  # _rebuild_tensor and _rebuild_tensor_v2 (requires_grad, ...)
    return _view(storage, offset, size, stride)


def _rebuild_parameter(data, *_):
    return data


GLOBALS = {
    ("collections", "OrderedDict"): OrderedDict,
    ("torch._utils", "_rebuild_tensor"): _rebuild_tensor,
    ("torch._utils", "_rebuild_tensor_v2"): _rebuild_tensor,
    ("torch._utils", "_rebuild_parameter"): _rebuild_parameter,
}


class Unpickler(pickle.Unpickler):
    """Knows a state dict's globals only, so a file cannot run code (torch.load's weights_only, without torch)."""

    def __init__(
        self,
        file: IO[bytes],
        persistent_load: Optional[Callable[[Any], Any]] = None,
        byteorder: "Literal['<', '>']" = "<",
    ) -> None:
        super().__init__(file, encoding="utf-8")  # as torch.load: Python 2 strings become str
        self._persistent = persistent_load
        self.byteorder = byteorder

    def find_class(self, module: str, name: str) -> Any:
        if (module, name) in GLOBALS:
            return GLOBALS[module, name]
        if module in ("torch", "torch.storage") and name in DTYPES:
            return StorageType(np.dtype(DTYPES[name]).newbyteorder(self.byteorder))
        if module == "torch" and name.endswith("Tensor"):  # the tar format names each tensor's class
            return name
        raise pickle.UnpicklingError(f"unexpected global {module}.{name}: not a plain state dict")

    def persistent_load(self, pid: Any) -> Any:
        if self._persistent is None:
            raise pickle.UnpicklingError(f"unexpected persistent id {pid!r}")
        return self._persistent(pid)


def _storage(storage_type, numel):
    return np.zeros(int(numel), storage_type.dtype)


def _read_zip(path):
    """torch >= 1.6: `ARCHIVE/data.pkl` whose storages are persistent ids naming raw entries `ARCHIVE/data/KEY`."""
    with zipfile.ZipFile(path) as z:
        pkl = next((n for n in z.namelist() if n.endswith("data.pkl") and n.count("/") == 1), None)
        if pkl is None:
            raise pickle.UnpicklingError("no */data.pkl in the archive")
        prefix = pkl[: -len("data.pkl")]
        order = z.read(prefix + "byteorder").decode() if prefix + "byteorder" in z.namelist() else "little"
        storages = {}

        def persistent_load(pid):
            kind, storage_type, key, _location, numel = pid
            if kind != "storage":
                raise pickle.UnpicklingError(f"unexpected persistent id {pid!r}")
            if key not in storages:
                raw = z.read(f"{prefix}data/{key}")
                if len(raw) != int(numel) * storage_type.dtype.itemsize:
                    raise pickle.UnpicklingError(f"storage {key} holds {len(raw)} bytes, expected {numel} elements")
                storages[key] = np.frombuffer(bytearray(raw), storage_type.dtype)
            return storages[key]

        with z.open(pkl) as f:
            return Unpickler(f, persistent_load, "<" if order == "little" else ">").load()


def _read_legacy(f):
    """torch 0.1.10 – 1.5: magic number, protocol, system info, the pickle, its storage keys, then raw storages."""
    if Unpickler(f).load() != LEGACY_MAGIC or Unpickler(f).load() != LEGACY_PROTOCOL:
        raise pickle.UnpicklingError("not a torch file (no magic number)")
    order = "<" if Unpickler(f).load().get("little_endian", True) else ">"
    roots, views = {}, {}

    def persistent_load(pid):
        kind, *data = pid
        if kind == "module":
            raise pickle.UnpicklingError("the file holds a pickled module, not a state dict")
        storage_type, key, _location, numel, view = data
        roots.setdefault(key, _storage(storage_type, numel))
        if view is None:
            return roots[key]
        view_key, offset, size = view
        return views.setdefault(view_key, roots[key][offset : offset + size])

    state = Unpickler(f, persistent_load, order).load()
    for key in Unpickler(f).load():  # storages follow in this order: int64 count, then the bytes
        storage = roots[key]
        (numel,) = struct.unpack(order + "q", f.read(8))
        raw = f.read(numel * storage.itemsize)
        if numel != len(storage) or len(raw) != storage.nbytes:
            raise pickle.UnpicklingError(f"storage {key} is truncated")
        storage[:] = np.frombuffer(raw, storage.dtype)
    return state


def _read_tar(tar):
    """torch's first format: tar members `storages`, `tensors` (raw geometry after each pickled header), `pickle`."""

    def member(name):
        f = tar.extractfile(name)
        if f is None:
            raise pickle.UnpicklingError(f"no {name} member")
        return f

    def key(k):
        return int(k) if isinstance(k, (int, str)) and str(k).lstrip("-").isdigit() else k

    storages, tensors = {}, {}
    f = member("storages")
    for _ in range(Unpickler(f).load()):
        k, _location, storage_type = Unpickler(f).load()
        (numel,) = struct.unpack("<q", f.read(8))
        raw = f.read(numel * storage_type.dtype.itemsize)
        if len(raw) != numel * storage_type.dtype.itemsize:
            raise pickle.UnpicklingError(f"storage {k} is truncated")
        storages[key(k)] = np.frombuffer(bytearray(raw), storage_type.dtype)
    for target, root, offset, numel in Unpickler(f).load():
        storages[key(target)] = storages[key(root)][offset : offset + numel]
    f = member("tensors")
    for _ in range(Unpickler(f).load()):
        k, storage_key, _tensor_type = Unpickler(f).load()
        (ndim,) = struct.unpack("<i", f.read(4))
        f.read(4)  # ndim was written as 8 bytes
        size = struct.unpack(f"<{ndim}q", f.read(8 * ndim))
        stride = struct.unpack(f"<{ndim}q", f.read(8 * ndim))
        (offset,) = struct.unpack("<q", f.read(8))
        tensors[key(k)] = _view(storages[key(storage_key)], offset, size, stride)

    def persistent_load(pid):
        if isinstance(pid, tuple):
            raise pickle.UnpicklingError("the file holds a pickled module, not a state dict")
        return tensors[key(pid)]

    return Unpickler(member("pickle"), persistent_load).load()


def read_pth(path: Union[str, Path]) -> Dict[str, np.ndarray]:
    """A torch.save'd state dict as {name: NumPy array} (each array its own copy), in any of torch's formats."""
    path = Path(path)
    try:
        if zipfile.is_zipfile(path):
            state = _read_zip(path)
        else:
            try:
                with tarfile.open(path, "r:") as tar:
                    state = _read_tar(tar)
            except tarfile.TarError:
                with open(path, "rb") as f:
                    state = _read_legacy(f)
    except (
        pickle.UnpicklingError,
        EOFError,
        KeyError,
        ValueError,
        TypeError,
        AttributeError,
        struct.error,
        zipfile.BadZipFile,
        OSError,
    ) as e:
        raise DataError(f"{path}: not a readable torch state dict ({type(e).__name__}: {e})") from e
    if not isinstance(state, dict) or not all(isinstance(v, np.ndarray) for v in state.values()):
        raise DataError(f"{path}: holds {type(state).__name__}, not a state dict of tensors")
    return {name: np.array(array) for name, array in state.items()}


# ---------------------------------------------------------------- conversion to the canonical layout


def to_canonical(
    state: Mapping[str, np.ndarray], task: str, shapes: Optional[Mapping[str, Tuple[int, ...]]] = None
) -> Dict[str, np.ndarray]:
    """A torchvision state dict -> the canonical arrays of `task` (float32), every name and shape checked.

    `shapes` defaults to canonical.SHAPES[task]; new heads (canonical.HEADS) come from canonical.init_weights, so
    the file's 1000-way ImageNet classifier is dropped, as is ResNet's fc (the canonical ResNet-50 stops at pooling).
    """
    shapes = canonical.SHAPES[task] if shapes is None else shapes
    expected = {name: shape for name, shape in shapes.items() if name not in canonical.HEADS.get(task, ())}
    out = {}
    for name, array in state.items():
        old = DENSENET_OLD_KEY.match(name)
        name = "".join(old.groups()) if old else name
        if DROPPED.search(name) and name not in expected:
            continue
        if name not in expected:
            raise DataError(
                f"{task}: the file has {name}, which the canonical layout does not: not torchvision's {task}?"
            )
        if tuple(array.shape) != tuple(expected[name]):
            raise DataError(
                f"{task}: {name} has shape {tuple(array.shape)}, the canonical layout {tuple(expected[name])}"
            )
        out[name] = np.ascontiguousarray(array, np.float32)
    missing = sorted(set(expected) - set(out))
    if missing:
        raise DataError(f"{task}: the file lacks {len(missing)} canonical arrays, e.g. {missing[:3]}")
    return out


# ---------------------------------------------------------------- the step


def hash_prefix(url_or_name: str) -> str:
    """torchvision's convention: the 8+ hex characters after the last dash of the file name start its SHA-256."""
    stem = Path(url_or_name).name.split(".")[0]
    match = re.search(r"-([0-9a-f]{8,})$", stem)
    if not match:
        raise ValueError(f"{url_or_name}: no SHA-256 prefix in the file name")
    return match.group(1)


def check_prefix(path: Union[str, Path], prefix: str) -> str:
    digest = file_digest(path, "sha256")
    if not digest.startswith(prefix):
        raise DataError(
            f"{path}: its SHA-256 starts {digest[: len(prefix)]}, the published file's {prefix}: the file "
            f"is corrupt, partial or another file"
        )
    return digest


def save_npz_atomic(path: Path, arrays: Mapping[str, Any]) -> None:
    """np.savez to a temporary name in the same folder, then rename: readers see no file or the whole file.
    `arrays`: {name: NumPy array} (typed Any: np.savez's stub types its **kwds as its `allow_pickle` flag)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "wb") as f:
            np.savez(f, **arrays)
            f.flush()
            os.fsync(f.fileno())
        os.chmod(tmp, 0o666 & ~UMASK)  # mkstemp's 0600 would hide the file from container users
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def manifest_path(root: Union[str, Path]) -> Path:
    return Path(root) / "weights" / "manifest.json"


def read_manifest(root: Union[str, Path]) -> Any:
    path = manifest_path(root)
    return json.loads(path.read_text()) if path.exists() else {"dataset": "weights", "tasks": {}}


def is_ready(root: Union[str, Path], task: str) -> bool:
    """The task's weights were converted from the current source file (the npz alone may predate a new source)."""
    entry = read_manifest(root)["tasks"].get(task, {})
    return canonical.weights_path(root, task).exists() and entry.get("url") == SOURCES[task]


def convert(
    root: Union[str, Path], task: str, pth: Union[str, Path], source: Union[str, Path], digest: Optional[str] = None
) -> Path:
    """Check `pth` against the published hash prefix (unless `digest` says it was), convert it, write the npz, then
    record it in the manifest: an npz without its manifest entry is converted again."""
    digest = digest or check_prefix(pth, hash_prefix(SOURCES[task]))
    weights = to_canonical(read_pth(pth), task)
    save_npz_atomic(canonical.weights_path(root, task), weights)
    manifest = read_manifest(root)
    manifest["tasks"][task] = {
        "url": SOURCES[task],
        "from": str(source),
        "sha256": digest,
        "arrays": len(weights),
        "npz_sha256": file_digest(canonical.weights_path(root, task), "sha256"),
        "created_at": now(),
    }
    write_atomic(manifest_path(root), json.dumps(manifest, indent=2) + "\n")
    return canonical.weights_path(root, task)


def fetch(root: Union[str, Path], task: str, opener: Callable[..., Any] = urllib.request.urlopen) -> Path:
    """Download `task`'s published file into ROOT/weights/torchvision/ (once) and convert it."""
    url = SOURCES[task]
    dest = Path(root) / "weights" / "torchvision" / Path(url).name
    try:
        download(url, dest, opener=opener)  # resumes a .part file; the hash prefix is checked below
    except OSError as e:
        raise DataError(
            f"cannot download {url}: {e}; check the network, or fetch the file on another machine and "
            f"run `python -m shared.weights --root {root} --from {dest.name}`"
        ) from e
    try:
        digest = check_prefix(dest, hash_prefix(url))
    except DataError as e:
        dest.unlink()  # never leave a bad file to be found again
        raise DataError(f"{e}; deleted it: run `python -m shared.weights --root {root}` to download it again") from e
    # torchvision publishes 32 bits of the hash, which a crafted file can match: the full SHA-256 of the file as
    # first downloaded (kept in the manifest) must match every later download of the same URL.
    first = read_manifest(root)["tasks"].get(task, {})
    if first.get("url") == url and first.get("sha256") and first["sha256"] != digest:
        raise DataError(
            f"{dest}: SHA-256 {digest}, but this URL gave {first['sha256']} when first downloaded "
            f"(the prefix {hash_prefix(url)} matches both): another file; if you trust it, delete the "
            f"{task} entry of {manifest_path(root)} and run `python -m shared.weights --root {root}`"
        )
    return convert(root, task, dest, url, digest)


def task_of(path: Union[str, Path]) -> str:
    """resnet50 / densenet121 from a published file name, e.g. `densenet121-a639ec97.pth`."""
    for task, url in SOURCES.items():
        if Path(path).name.split("-")[0] == Path(url).name.split("-")[0]:
            return task
    raise DataError(f"{path}: not one of the published files ({', '.join(Path(u).name for u in SOURCES.values())})")


def prepare(
    root: Union[str, Path],
    tasks: Iterable[str] = tuple(SOURCES),
    files: Sequence[Union[str, Path]] = (),
    opener: Callable[..., Any] = urllib.request.urlopen,
) -> None:
    """Make each task's canonical ImageNet weights ready under `root`: from `files` where given, else downloaded."""
    for path in files:
        task = task_of(path)
        if not Path(path).is_file():
            raise DataError(f"{path}: no such file")
        print(f"{task}: converting {path} …", flush=True)
        print(f"{task}: ready in {convert(root, task, path, Path(path).resolve())}")
    for task in tasks:
        if any(task_of(path) == task for path in files):
            continue
        if is_ready(root, task):
            print(f"{task}: ready in {canonical.weights_path(root, task)}")
            continue
        print(f"{task}: downloading {SOURCES[task]} …", flush=True)
        print(f"{task}: ready in {fetch(root, task, opener)}")


def main(argv: Optional[Sequence[str]] = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m shared.weights", description=__doc__.split("\n")[0])
    parser.add_argument("--root", required=True, help="data root, e.g. data/real (the weights go to ROOT/weights)")
    parser.add_argument(
        "--tasks", nargs="+", choices=list(SOURCES), help="default: both, or with --from only the files given"
    )
    parser.add_argument(
        "--from",
        dest="files",
        nargs="+",
        default=[],
        metavar="FILE",
        help="convert published .pth files copied by hand instead of downloading them",
    )
    args = parser.parse_args(argv)
    try:
        prepare(args.root, args.tasks or ([] if args.files else list(SOURCES)), args.files)
    except DataError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
