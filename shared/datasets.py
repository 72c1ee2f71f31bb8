"""Datasets: checksum-verified downloads, their synthetic twins in the same on-disk formats, and the loaders.

Layout under a data root (`data/real`, `data/synthetic`, or `/data/...` in a container):
    cifar10/cifar-10-batches-py/{data_batch_1..5,test_batch}   the python pickles of the CIFAR-10 tarball
    imdb/imdb.npz                                              Keras' file: word ranks, labels
    chestxray14/raw/{images/*.png, Data_Entry_2017.csv}        NIH's files
    chestxray14/prepared/{images,labels,split}.npy             resized once to 264, split by patient
    */manifest.json                                            written last: a dataset without one is not ready

Run `python -m shared.datasets --root data/synthetic --synthetic` (tests, demo) or `--root data/real --real`
(`make data`).
Add `--datasets NAME --force` to rebuild one dataset: a synthetic twin is generated again; real data is extracted and
prepared again from its verified download (a download that fails its checksum is fetched again).

Every file a loader reads is checked (present, the size the manifest recorded, parseable, the expected shapes), and a
bad one raises DataError naming the dataset, the file and the command that rebuilds it.
"""

import argparse
import contextlib
import hashlib
import importlib
import io
import json
import pickle
import shutil
import sys
import tarfile
import urllib.request
import zipfile
from pathlib import Path
from typing import IO, Any, Callable, Dict, Iterable, Iterator, Mapping, Optional, Sequence, Tuple, Union

import numpy as np

from shared import params
from shared.record import now, write_atomic

# Pickled arrays name the module of their reconstructor: NumPy 2 writes `numpy._core…`, NumPy 1.x `numpy.core…`.
# NumPy 2 still reads the old name, NumPy 1.x (the MXNet and Chainer environments pin 1.23) not the new one, so files
# written on the host (NumPy 2) would be unreadable there; alias the new names, as NumPy 1.26 itself does.
if not hasattr(np, "_core"):
    for _sub in ("", ".multiarray", ".numeric", "._multiarray_umath"):
        sys.modules.setdefault("numpy._core" + _sub, importlib.import_module("numpy.core" + _sub))

CIFAR_URL = "https://www.cs.toronto.edu/~kriz/cifar-10-python.tar.gz"
CIFAR_MD5 = "c58f30108f718f92721af3b95e74349a"  # published on the CIFAR-10 page (MD5 alone no longer proves a file)
CIFAR_SHA256 = "6d958be074577803d12ecdefd02955f39262c83c16fe9348329d7fe0b5c001ce"  # the hash keras.datasets checks
IMDB_URL = "https://storage.googleapis.com/tensorflow/tf-keras-datasets/imdb.npz"
IMDB_SHA256 = "69664113be75683a8fe16e3ed0ab59fda8886cb3cd7ada244f7d9544e4676b9f"  # the hash keras.datasets checks
# NIH publishes no checksums for the ChestX-ray14 archives: each is checked by reading it whole (gzip's CRC catches a
# corrupt or partial file) and the image count is checked against the CSV.
CHEST_BOX = "https://nihcc.box.com/shared/static/"
CHEST_ARCHIVES = [
    CHEST_BOX + key + ".gz"
    for key in (
        "vfk49d74nhbxq3nqjg0900w5nvkorp5c",
        "i28rlmbvmfjbl8p2n3ril0pptcmcu9d1",
        "f1t00wrtdk94satdfb9olcolqx20z2jp",
        "0aowwzs5lhjrceb3qp67ahp0rd1l1etg",
        "v5e3goj22zr6h8tzualxfsqlqaygfbsn",
        "asi7ikud9jwnkrnkj99jnpfkjdes7l6l",
        "jn1b4mw4n6lnh74ovmcjb8y48h8xj07n",
        "tvpxmn7qyrgl0w8wfh9kqfjskv6nmm1j",
        "upyy3ml7qdumlgk2rfcvlb9k6gvqq2pj",
        "l6nilvfa9cg3s28tqv1qc1olm3gnz54p",
        "hhq8fkdgvcari67vfhs7ppg2w6ni4jze",
        "ioqwiy20ihqwyr8pf4c24eazhh281pbu",
    )
]
CHEST_PAGE = "https://nihcc.app.box.com/v/ChestXray-NIHCC"
CHEST_LABELS = (
    "Atelectasis",
    "Cardiomegaly",
    "Effusion",
    "Infiltration",
    "Mass",
    "Nodule",
    "Pneumonia",
    "Pneumothorax",
    "Consolidation",
    "Edema",
    "Emphysema",
    "Fibrosis",
    "Pleural_Thickening",
    "Hernia",
)
CHEST_CSV = "Data_Entry_2017.csv"
CHEST_PINS = "archives.sha256.json"  # NIH publishes no hashes: each archive's, as first downloaded (pinned_download)
CHEST_CSV_COLUMNS = (
    "Image Index",
    "Finding Labels",
    "Follow-up #",
    "Patient ID",
    "Patient Age",
    "Patient Gender",
    "View Position",
    "OriginalImage[Width",
    "Height]",
    "OriginalImagePixelSpacing[x",
    "y]",
)


class DataError(Exception):
    """A dataset that is missing, partial or corrupt; the message says how to get a good one."""


# What reading a truncated, overwritten or foreign file raises in pickle, zipfile, numpy and json.
READ_ERRORS = (
    OSError,
    EOFError,
    ValueError,
    KeyError,
    IndexError,
    TypeError,
    AttributeError,
    OverflowError,
    MemoryError,
    pickle.UnpicklingError,
    zipfile.BadZipFile,
)


class ArraysOnly(pickle.Unpickler):
    """An unpickler for data files: NumPy arrays, their dtypes and plain containers, nothing else. A pickle may name
    any importable callable (`os.system`), and a crafted CIFAR batch or imdb.npz of the right size would run it on
    load; these files need only what they hold, so every other global is refused with the name it asked for."""

    ALLOWED = {
        (module + suffix, name)
        for module in ("numpy.core", "numpy._core")
        for suffix, name in ((".multiarray", "_reconstruct"), (".multiarray", "scalar"))
    }
    ALLOWED |= {
        ("numpy", "ndarray"),
        ("numpy", "dtype"),
        ("_codecs", "encode"),
    }  # protocol 2 pickles carry an array's bytes as text, turned back by this

    def find_class(self, module: str, name: str) -> Any:
        if (module, name) in self.ALLOWED:
            return super().find_class(module, name)
        raise pickle.UnpicklingError(
            f"refused to load {module}.{name}: a data file holds only arrays and lists (a crafted or foreign file)"
        )


def unpickle(f: IO[bytes]) -> Any:
    """`pickle.load` for data files (ArraysOnly); bytes keys stay bytes, as in CIFAR's Python 2 batches."""
    return ArraysOnly(f, encoding="bytes").load()


def load_npz(path: Union[str, Path]) -> Dict[str, np.ndarray]:
    """{name: array} of an .npz, where object arrays (Keras' ragged IMDB reviews) are unpickled by ArraysOnly
    instead of `np.load(allow_pickle=True)`, which would run whatever the file names."""
    arrays = {}
    with zipfile.ZipFile(path) as z:
        for member in z.namelist():
            buffer = io.BytesIO(z.read(member))
            version = np.lib.format.read_magic(buffer)
            read_header = (
                np.lib.format.read_array_header_1_0 if version == (1, 0) else np.lib.format.read_array_header_2_0
            )
            dtype = read_header(buffer)[2]
            if dtype.hasobject:
                array = ArraysOnly(buffer, encoding="latin1").load()
            else:
                buffer.seek(0)
                array = np.lib.format.read_array(buffer, allow_pickle=False)
            arrays[member[: -len(".npy")] if member.endswith(".npy") else member] = array
    return arrays


def rebuild_command(root: Union[str, Path], dataset: str, source: str) -> str:
    kind = "--real" if source == "real" else "--synthetic"
    return f"python -m shared.datasets --root {root} {kind} --datasets {dataset} --force"


def damaged(
    root: Union[str, Path], dataset: str, path: Union[str, Path], problem: str, source: Optional[str] = None
) -> "DataError":
    """The DataError for a file of `dataset` that cannot be used: which file, what is wrong, the command that rebuilds
    it (for the source the manifest names; both commands when the manifest itself is unreadable)."""
    if source in ("real", "synthetic"):
        fix = f"rebuild it: `{rebuild_command(root, dataset, source)}`"
    else:
        fix = (
            f"rebuild it: `{rebuild_command(root, dataset, 'real')}` (real data) or "
            f"`{rebuild_command(root, dataset, 'synthetic')}` (synthetic twin)"
        )
    state = "is missing" if problem == "missing" else f"is damaged ({problem})"
    return DataError(f"{dataset}: {path} {state}; {fix}")


@contextlib.contextmanager
def reading(root: Union[str, Path], dataset: str, path: Union[str, Path], source: Optional[str]) -> Iterator[None]:
    """Turn a failure to read or parse `path` (truncated, overwritten, wrong shape) into a DataError saying so."""
    try:
        yield
    except DataError:
        raise
    except FileNotFoundError as e:
        raise damaged(root, dataset, path, "missing", source) from e
    except PermissionError as e:
        raise DataError(f"{dataset}: {path} cannot be read ({e}); check the data folder's permissions") from e
    except READ_ERRORS as e:
        raise damaged(root, dataset, path, f"{type(e).__name__}: {e}", source) from e


def file_sizes(folder: Union[str, Path], names: Iterable[str]) -> Dict[str, int]:
    """{name: bytes} of the files a manifest vouches for, so a truncated or replaced file is caught by a stat."""
    return {name: (Path(folder) / name).stat().st_size for name in names}


def check_files(root: Union[str, Path], dataset: str, manifest: Mapping[str, Any], names: Iterable[str]) -> None:
    """Each of `names` (relative to the dataset folder) exists and has the size the manifest recorded (manifests
    written before sizes were recorded skip the size check)."""
    folder = Path(root) / dataset
    recorded = manifest.get("files", {})
    for name in names:
        path = folder / name
        if not path.is_file():
            raise damaged(root, dataset, path, "missing", manifest.get("source"))
        size = path.stat().st_size
        if name in recorded and size != recorded[name]:
            raise damaged(
                root,
                dataset,
                path,
                f"{size} bytes where the manifest recorded {recorded[name]}: truncated or overwritten",
                manifest.get("source"),
            )


# ---------------------------------------------------------------- downloads and manifests


def file_digest(path: Union[str, Path], algorithm: str) -> str:
    h = hashlib.new(algorithm)
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def verify(path: Union[str, Path], algorithm: str, expected: str) -> None:
    actual = file_digest(path, algorithm)
    if actual != expected:
        raise DataError(
            f"{path}: {algorithm} is {actual}, expected {expected}: the file is corrupt or partial; "
            f"delete it and download again"
        )


def download(
    url: str,
    dest: Union[str, Path],
    algorithm: Optional[str] = None,
    expected: Optional[str] = None,
    opener: Callable[..., Any] = urllib.request.urlopen,
    replace_corrupt: bool = False,
) -> Path:
    """Fetch `url` to `dest` once: resume a `.part` file where the server allows, verify, then rename into place.

    A file already at `dest` is verified, never trusted; a mismatch is an error, so nothing corrupt is ever used
    (with `replace_corrupt`, as `--force` asks, the bad file is deleted and fetched again instead).
    """
    dest = Path(dest)
    if dest.exists():
        if not expected:
            return dest
        assert algorithm, "an expected digest comes with its algorithm"
        try:
            verify(dest, algorithm, expected)
            return dest
        except DataError:
            if not replace_corrupt:
                raise
            dest.unlink()
    dest.parent.mkdir(parents=True, exist_ok=True)
    part = dest.with_name(dest.name + ".part")
    have = part.stat().st_size if part.exists() else 0
    request = urllib.request.Request(url, headers={"Range": f"bytes={have}-"} if have else {})
    with opener(request) as response:
        resumed = have and getattr(response, "status", 200) == 206
        with open(part, "ab" if resumed else "wb") as f:  # a server that ignores Range restarts the file cleanly
            shutil.copyfileobj(response, f, 1 << 20)
    if expected:
        assert algorithm, "an expected digest comes with its algorithm"
        try:
            verify(part, algorithm, expected)
        except DataError:
            part.unlink()
            raise
    part.rename(dest)
    return dest


def pinned_download(
    url: str, dest: Union[str, Path], pins: Union[str, Path], opener: Callable[..., Any] = urllib.request.urlopen
) -> Tuple[Path, str]:
    """Trust on first use, for files nobody publishes a hash of (ChestX-ray14's archives): the SHA-256 of `dest` as
    first downloaded is kept in the JSON file `pins`, and every later download or reuse of that file must match it,
    so a file replaced on the server or on the disk afterwards is refused. Returns (dest, its SHA-256)."""
    pins, name = Path(pins), Path(dest).name
    try:
        known = json.loads(pins.read_text()) if pins.exists() else {}
        if not isinstance(known, dict):
            raise ValueError("not an object")
    except ValueError as e:
        raise DataError(
            f"{pins}: not a readable list of pinned hashes ({e}); delete it to trust the archives "
            "as they are downloaded next"
        ) from e
    if name in known:
        try:
            return download(url, dest, "sha256", known[name], opener=opener), known[name]
        except DataError as e:
            raise DataError(
                f"{e} ({name} was pinned in {pins} when first downloaded: the server or the disk now has another file)"
            ) from e
    dest = download(url, dest, opener=opener)
    known[name] = file_digest(dest, "sha256")
    write_atomic(pins, json.dumps(known, indent=1, sort_keys=True) + "\n")
    return dest, known[name]


def write_manifest(folder: Union[str, Path], dataset: str, source: str, **extra: Any) -> None:
    write_atomic(
        Path(folder) / "manifest.json",
        json.dumps({"dataset": dataset, "source": source, "created_at": now(), **extra}, indent=2) + "\n",
    )


def read_manifest(folder: Union[str, Path], dataset: str) -> Any:
    path = Path(folder) / "manifest.json"
    root = Path(folder).parent
    if not path.exists():
        raise DataError(
            f"{dataset} is not prepared under {folder}: run `make data` for the real data or "
            f"`python -m shared.datasets --root {root} --synthetic` for the synthetic twin"
        )
    with reading(root, dataset, path, None):
        manifest = json.loads(path.read_text())
        if manifest.get("dataset") != dataset or manifest.get("source") not in ("real", "synthetic"):
            raise ValueError(f"it says dataset {manifest.get('dataset')!r}, source {manifest.get('source')!r}")
    return manifest


def data_source(root: Union[str, Path], task: str) -> str:
    """'real' or 'synthetic': what the record's `cell.data` says, read from the dataset's manifest."""
    if task == "resnet50":
        return "synthetic"  # random images by definition (docs/design.md)
    dataset = params.task_params(task)["dataset"]
    return read_manifest(Path(root) / dataset, dataset)["source"]


# ---------------------------------------------------------------- CIFAR-10

CIFAR_BATCHES = [f"data_batch_{i}" for i in range(1, 6)] + ["test_batch"]


def load_cifar10(
    root: Union[str, Path], train_samples: Optional[int] = None, test_samples: Optional[int] = None
) -> Tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """(x_train, y_train, x_test, y_test): float32 (N, 3, 32, 32) in [0, 1] and int32 labels."""
    folder = Path(root) / "cifar10"
    manifest = read_manifest(folder, "cifar10")
    check_files(root, "cifar10", manifest, [f"cifar-10-batches-py/{name}" for name in CIFAR_BATCHES])

    def read(names):
        xs, ys = [], []
        for name in names:
            path = folder / "cifar-10-batches-py" / name
            with reading(root, "cifar10", path, manifest["source"]):
                with open(path, "rb") as f:
                    d = unpickle(f)
                x, y = np.asarray(d[b"data"]), np.asarray(d[b"labels"])
                if x.dtype != np.uint8 or x.ndim != 2 or x.shape[1] != 3 * 32 * 32 or y.shape != (len(x),):
                    raise ValueError(
                        f"data {x.dtype}{list(x.shape)} and labels {list(y.shape)}, expected uint8[N, 3072] and [N]"
                    )
                if len(y) and (y.min() < 0 or y.max() > 9):
                    raise ValueError(f"labels outside 0..9 ({y.min()}..{y.max()})")
            xs.append(x)
            ys.append(y.astype(np.int32))
        return np.concatenate(xs), np.concatenate(ys)

    x_train, y_train = read(CIFAR_BATCHES[:5])
    x_test, y_test = read(CIFAR_BATCHES[5:])
    x_train, y_train = x_train[:train_samples], y_train[:train_samples]
    x_test, y_test = x_test[:test_samples], y_test[:test_samples]
    scale = lambda x: x.reshape(-1, 3, 32, 32).astype(np.float32) / 255.0
    return scale(x_train), y_train, scale(x_test), y_test


def prepare_cifar10_real(root: Union[str, Path], force: bool = False) -> None:
    folder = Path(root) / "cifar10"
    tarball = download(CIFAR_URL, folder / "cifar-10-python.tar.gz", "sha256", CIFAR_SHA256, replace_corrupt=force)
    with tarfile.open(tarball) as tar:
        tar.extractall(folder, filter="data")
    write_manifest(
        folder,
        "cifar10",
        "real",
        url=CIFAR_URL,
        sha256=CIFAR_SHA256,
        md5=CIFAR_MD5,
        files=file_sizes(folder, [f"cifar-10-batches-py/{name}" for name in CIFAR_BATCHES]),
    )


def make_cifar10_synthetic(
    root: Union[str, Path],
    train: int = 5120,
    test: int = 1024,
    seed: int = params.SEED,
    test_blend: Tuple[float, float] = (0.7, 0.9),
) -> None:
    """The CIFAR-10 pickles with images = grey ± class pattern + noise (learnable, seeded, small).

    Each class's pattern is a random black-and-white 16×16 checkerboard (2×2-pixel cells, per colour channel): the
    label is spread over hundreds of small local cues rather than a few strong pixels. Training images show their
    class's pattern; a test image blends it (weight .7-.9) with another class's, so a correct model still classifies
    nearly all of them but with small margins: noise added at evaluation (dropout left on, seed lesson 4) then flips
    many predictions, which the learnability test sees as a clear drop in accuracy.
    """
    folder = Path(root) / "cifar10"
    out = folder / "cifar-10-batches-py"
    out.mkdir(parents=True, exist_ok=True)
    rng = np.random.default_rng(seed)
    patterns = rng.choice([-1.0, 1.0], (10, 3, 16, 16)).repeat(2, axis=2).repeat(2, axis=3).astype(np.float32)

    def images(n, blend):
        y = rng.integers(0, 10, n)
        other = (y + rng.integers(1, 10, n)) % 10  # any class but y
        w = rng.uniform(*blend, (n, 1, 1, 1))  # the label's share of the pattern
        x = 0.5 + 0.5 * (w * patterns[y] + (1 - w) * patterns[other]) + rng.normal(0, 0.02, (n, 3, 32, 32))
        return (np.clip(x, 0, 1) * 255).round().astype(np.uint8).reshape(n, -1), y

    x, y = images(train, (1, 1))  # training images: pure patterns
    for i, idx in enumerate(np.array_split(np.arange(train), 5), start=1):
        pickle_to(out / f"data_batch_{i}", {b"data": x[idx], b"labels": y[idx].tolist()})
    x, y = images(test, test_blend)
    pickle_to(out / "test_batch", {b"data": x, b"labels": y.tolist()})
    write_manifest(
        folder,
        "cifar10",
        "synthetic",
        seed=seed,
        train=train,
        test=test,
        files=file_sizes(folder, [f"cifar-10-batches-py/{name}" for name in CIFAR_BATCHES]),
    )


def pickle_to(path: Path, obj: Any) -> None:
    path.write_bytes(pickle.dumps(obj, protocol=2))


# ---------------------------------------------------------------- IMDB


def load_imdb(
    root: Union[str, Path],
    max_features: int,
    maxlen: int,
    train_samples: Optional[int] = None,
    test_samples: Optional[int] = None,
    start_char: int = 1,
    oov_char: int = 2,
    index_from: int = 3,
) -> Tuple[np.ndarray, ...]:
    """(x_train, y_train, x_test, y_test): int32 (N, maxlen) word ids in the Keras convention, int32 labels.

    Word ids are start 1, OOV 2, rank r -> r + 3, ids >= max_features -> OOV; sequences padded with 0 and truncated
    at the front (Keras `pad_sequences` defaults), so the last time step is the end of the review.
    """
    folder = Path(root) / "imdb"
    manifest = read_manifest(folder, "imdb")
    check_files(root, "imdb", manifest, ["imdb.npz"])
    path = folder / "imdb.npz"
    out = []
    with reading(root, "imdb", path, manifest["source"]):
        f = load_npz(path)  # Keras' file holds ragged lists as object arrays
        splits = [(f["x_train"], f["y_train"], train_samples), (f["x_test"], f["y_test"], test_samples)]
        for seqs, labels, samples in splits:
            if seqs.ndim != 1 or labels.shape != seqs.shape or not set(np.unique(labels).tolist()) <= {0, 1}:
                raise ValueError(
                    f"reviews {list(seqs.shape)} and labels {list(labels.shape)} with values "
                    f"{np.unique(labels)[:5].tolist()}, expected [N] and [N] of 0/1"
                )
            seqs, labels = seqs[:samples], labels[:samples]
            x = np.zeros((len(seqs), maxlen), np.int32)
            for i, seq in enumerate(seqs):
                ids = np.concatenate([[start_char], np.asarray(seq, np.int64) + index_from])
                ids[ids >= max_features] = oov_char
                ids = ids[-maxlen:]
                x[i, maxlen - len(ids) :] = ids
            out += [x, np.asarray(labels, np.int32)]
    return tuple(out)


def prepare_imdb_real(root: Union[str, Path], force: bool = False) -> None:
    folder = Path(root) / "imdb"
    download(IMDB_URL, folder / "imdb.npz", "sha256", IMDB_SHA256, replace_corrupt=force)
    write_manifest(folder, "imdb", "real", url=IMDB_URL, sha256=IMDB_SHA256, files=file_sizes(folder, ["imdb.npz"]))


def make_imdb_synthetic(
    root: Union[str, Path],
    train: int = 5120,
    test: int = 1024,
    vocabulary: int = 40_000,
    seed: int = params.SEED,
    verdict_words: int = 8,
) -> None:
    """imdb.npz with reviews of random word ranks whose last words carry the label (learnable).

    Like a review that ends with its verdict, only the last `verdict_words` words say the sentiment (about half of them
    are sentiment words of the label); the body holds random words and sentiment words of both kinds, unrelated to
    the label. Every review is longer than the tiny scale's 40 steps and many exceed 150, so a model that reads the
    wrong end of the padded sequence (its first step, or text padded/truncated at the back) sees only noise.
    """
    folder = Path(root) / "imdb"
    folder.mkdir(parents=True, exist_ok=True)
    rng = np.random.default_rng(seed)
    sentiment_words = np.arange(10, 30).reshape(2, 10)  # frequent ranks, so they stay in the vocabulary

    def reviews(n):
        y = rng.integers(0, 2, n)
        xs = np.empty(n, dtype=object)
        for i in range(n):
            length = int(rng.integers(50, 300))
            seq = rng.integers(30, vocabulary, length)  # ranks >= 30,000 - 3 exercise the OOV mapping
            mixed = rng.random(length) < 0.1
            seq[mixed] = rng.integers(10, 30, int(mixed.sum()))
            verdict = np.flatnonzero(rng.random(verdict_words) < 0.5) + length - verdict_words
            seq[verdict] = rng.choice(sentiment_words[y[i]], len(verdict))
            xs[i] = seq.tolist()
        return xs, y

    x_train, y_train = reviews(train)
    x_test, y_test = reviews(test)
    tmp = folder / "imdb.tmp.npz"
    np.savez(tmp, x_train=x_train, y_train=y_train, x_test=x_test, y_test=y_test)
    tmp.rename(folder / "imdb.npz")
    write_manifest(
        folder, "imdb", "synthetic", seed=seed, train=train, test=test, files=file_sizes(folder, ["imdb.npz"])
    )


# ---------------------------------------------------------------- ChestX-ray14


def chest_labels(finding_labels: str) -> np.ndarray:
    """'Effusion|Mass' -> 14-element multi-hot float32 in CHEST_LABELS order ('No Finding' is all zeros)."""
    found = set(finding_labels.split("|"))
    return np.array([name in found for name in CHEST_LABELS], np.float32)


def split_by_patient(patient_ids: Sequence[int], fractions: Sequence[float], seed: int = params.SEED) -> np.ndarray:
    """0/1/2 (train/valid/test) per image; all images of a patient land in the same split, so no patient leaks."""
    patients = np.unique(patient_ids)
    np.random.default_rng(seed).shuffle(patients)
    cuts = np.cumsum(np.asarray(fractions[:2]) * len(patients)).round().astype(int)
    which = np.zeros(len(patients), np.int8)
    which[cuts[0] : cuts[1]] = 1
    which[cuts[1] :] = 2
    lookup = dict(zip(patients.tolist(), which.tolist()))
    return np.array([lookup[p] for p in np.asarray(patient_ids).tolist()], np.int8)


def prepare_chestxray(root: Union[str, Path], size: int = params.DENSENET121["stored_size"]) -> int:
    """Resize every image of raw/ once to `size` into prepared/images.npy (uint8 N×size×size), with labels and split."""
    import csv

    from PIL import Image  # only data preparation decodes PNGs; runners read the prepared arrays

    folder = Path(root) / "chestxray14"
    raw = folder / "raw"
    csv_path = raw / CHEST_CSV
    if not csv_path.exists():
        raise DataError(f"{csv_path} is missing: download {CHEST_CSV} from {CHEST_PAGE} into {raw}")
    with open(csv_path, newline="") as f:
        rows = list(csv.DictReader(f))
    images_dir = raw / "images"
    missing = [r["Image Index"] for r in rows if not (images_dir / r["Image Index"]).exists()]
    if missing:
        raise DataError(
            f"{len(missing)} of {len(rows)} images listed in {CHEST_CSV} are missing under {images_dir} "
            f"(first: {missing[0]}); re-run the download (`make data`)"
        )
    out = folder / "prepared"
    out.mkdir(parents=True, exist_ok=True)
    tmp = out / "images.tmp.npy"
    images = np.lib.format.open_memmap(tmp, mode="w+", dtype=np.uint8, shape=(len(rows), size, size))
    for i, row in enumerate(rows):
        with Image.open(images_dir / row["Image Index"]) as im:
            # Pillow < 9.1 has no Image.Resampling; later ones set BILINEAR at run time, which their stubs omit
            images[i] = np.asarray(im.convert("L").resize((size, size), Image.BILINEAR))  # type: ignore[attr-defined]
    images.flush()
    del images
    np.save(out / "labels.npy", np.stack([chest_labels(r["Finding Labels"]) for r in rows]))
    np.save(out / "split.npy", split_by_patient([int(r["Patient ID"]) for r in rows], params.DENSENET121["split"]))
    tmp.rename(out / "images.npy")
    return len(rows)


CHEST_PREPARED = [f"prepared/{name}.npy" for name in ("images", "labels", "split")]


def raw_chestxray_complete(raw: Path) -> bool:
    """The CSV is there and every image it lists is extracted (then a rebuild only prepares again)."""
    import csv

    if not (raw / CHEST_CSV).exists():
        return False
    with open(raw / CHEST_CSV, newline="") as f:
        return all((raw / "images" / row["Image Index"]).exists() for row in csv.DictReader(f))


def prepare_chestxray_real(root: Union[str, Path], force: bool = False) -> None:
    folder = Path(root) / "chestxray14"
    raw = folder / "raw"
    for i, url in enumerate([] if raw_chestxray_complete(raw) else CHEST_ARCHIVES, start=1):
        archive, _ = pinned_download(url, raw / f"images_{i:03d}.tar.gz", raw / CHEST_PINS)
        try:
            with tarfile.open(archive) as tar:  # reading it whole checks gzip's CRC
                tar.extractall(raw, filter="data")
        except (tarfile.TarError, EOFError, OSError) as e:
            archive.unlink()
            raise DataError(f"{archive} is corrupt or partial ({e}); deleted it, run `make data` again") from e
    n = prepare_chestxray(root)
    pins = raw / CHEST_PINS
    write_manifest(
        folder,
        "chestxray14",
        "real",
        images=n,
        page=CHEST_PAGE,
        files=file_sizes(folder, CHEST_PREPARED),
        archives_sha256=json.loads(pins.read_text()) if pins.exists() else None,
    )


def make_chestxray_synthetic(root: Union[str, Path], n: int = 640, size: int = 300, seed: int = params.SEED) -> None:
    """PNG images + Data_Entry_2017.csv where each finding draws a bright blob at its own place (learnable).

    Findings co-occur, as in sick patients: half the patients have each finding with probability .75, the others
    with .05. So every label also carries the shared signal (many large blobs or almost none), which a DenseNet picks
    up within the few steps of the tiny scale (mean AUC well above .5), while each blob's place tells findings apart.
    """
    from PIL import Image

    folder = Path(root) / "chestxray14"
    images_dir = folder / "raw" / "images"
    images_dir.mkdir(parents=True, exist_ok=True)
    rng = np.random.default_rng(seed)
    yy, xx = np.mgrid[0:size, 0:size] / size
    centers = rng.uniform(0.2, 0.8, (len(CHEST_LABELS), 2))
    rows = []
    for i in range(n):
        present = rng.random(len(CHEST_LABELS)) < (0.75 if rng.random() < 0.5 else 0.05)
        img = rng.normal(0.35, 0.08, (size, size))
        for cy, cx in centers[present]:
            img += 0.6 * np.exp(-((yy - cy) ** 2 + (xx - cx) ** 2) / 0.03)
        name = f"{i:08d}_000.png"
        Image.fromarray((np.clip(img, 0, 1) * 255).astype(np.uint8)).save(images_dir / name)
        findings = "|".join(np.asarray(CHEST_LABELS)[present]) or "No Finding"
        rows.append([name, findings, 0, i // 2 + 1, 50, "M", "PA", size, size, 0.143, 0.143])
    import csv

    with open(folder / "raw" / CHEST_CSV, "w", newline="") as f:
        writer = csv.writer(f)
        writer.writerow(CHEST_CSV_COLUMNS)
        writer.writerows(rows)
    prepare_chestxray(root)
    write_manifest(folder, "chestxray14", "synthetic", seed=seed, images=n, files=file_sizes(folder, CHEST_PREPARED))


class ChestXray:
    """The prepared ChestX-ray14 split as uint8 images (memory-mapped) and multi-hot labels."""

    def __init__(
        self,
        root: Union[str, Path],
        split: str,
        samples: Optional[int] = None,
        stored_size: int = params.DENSENET121["stored_size"],
    ) -> None:
        folder = Path(root) / "chestxray14"
        manifest = read_manifest(folder, "chestxray14")
        check_files(root, "chestxray14", manifest, CHEST_PREPARED)
        prepared = folder / "prepared"

        def load(name, check, expected, **kwargs):
            """One prepared array, its shape and values checked, or a DataError naming the file and the fix."""
            path = prepared / name
            with reading(root, "chestxray14", path, manifest["source"]):
                array = np.load(path, **kwargs)
                if not check(array):
                    raise ValueError(f"{array.dtype}{list(array.shape)}, expected {expected}")
            return array

        images = load(
            "images.npy",
            lambda a: a.dtype == np.uint8 and a.ndim == 3 and a.shape[1] == a.shape[2],
            "uint8[N, S, S]",
            mmap_mode="r",
        )
        n = len(images)
        labels = load(
            "labels.npy",
            lambda a: a.shape == (n, len(CHEST_LABELS)) and np.isin(a, (0, 1)).all(),
            f"[{n}, {len(CHEST_LABELS)}] of 0/1 (N from images.npy)",
        )
        split_of = load(
            "split.npy",
            lambda a: a.shape == (n,) and np.isin(a, (0, 1, 2)).all(),
            f"[{n}] of 0/1/2 (N from images.npy)",
        )
        which = {"train": 0, "valid": 1, "test": 2}[split]
        index = np.flatnonzero(split_of == which)[:samples]
        self.images, self.labels, self.index = images, labels[index], index
        have = self.images.shape[1]
        # Smaller scales shrink the stored images once, in memory (nearest neighbour), instead of a second copy on disk.
        self.pixels = None if stored_size == have else np.linspace(0, have - 1, stored_size).round().astype(int)
        if self.pixels is not None:
            with reading(root, "chestxray14", prepared / "images.npy", manifest["source"]):
                self.images = self.images[index][:, self.pixels[:, None], self.pixels[None, :]]
            self.index = np.arange(len(index))

    def __len__(self) -> int:
        return len(self.index)

    def batch(self, idx: Any, crop: int, rng: "Optional[np.random.Generator]" = None) -> Tuple[np.ndarray, np.ndarray]:
        """Images (len(idx), 3, crop, crop) float32, ImageNet-normalized; random crop + flip when `rng` is given
        (training), centre crop otherwise (evaluation)."""
        raw = self.images[self.index[idx]]
        n, size = len(raw), raw.shape[1]
        if rng is None:
            top = left = np.full(n, (size - crop) // 2)
            flip = np.zeros(n, bool)
        else:
            top, left = rng.integers(0, size - crop + 1, (2, n))
            flip = rng.random(n) < 0.5
        out = np.empty((n, crop, crop), np.float32)
        for i in range(n):
            patch = raw[i, top[i] : top[i] + crop, left[i] : left[i] + crop]
            out[i] = patch[:, ::-1] if flip[i] else patch
        out /= 255.0
        mean = np.asarray(params.DENSENET121["imagenet_mean"], np.float32)[:, None, None]
        std = np.asarray(params.DENSENET121["imagenet_std"], np.float32)[:, None, None]
        return (out[:, None] - mean) / std, self.labels[idx]


def random_images(n: int, size: int, seed: int = params.SEED) -> np.ndarray:
    """The ResNet-50 input: `n` random images (n, 3, size, size) float32, ImageNet-like range."""
    return np.random.default_rng(seed).standard_normal((n, 3, size, size), dtype=np.float32)


# ---------------------------------------------------------------- CLI

SYNTHETIC = {
    "cifar10": make_cifar10_synthetic,
    "imdb": make_imdb_synthetic,
    "chestxray14": make_chestxray_synthetic,
}  # type: Dict[str, Callable[..., None]]
REAL = {
    "cifar10": prepare_cifar10_real,
    "imdb": prepare_imdb_real,
    "chestxray14": prepare_chestxray_real,
}  # type: Dict[str, Callable[..., None]]
FULL_SIZE = {"cifar10": {"train": 50_000, "test": 10_000}, "imdb": {"train": 25_000, "test": 25_000}}  # the real sets'


def prepare(
    root: Union[str, Path],
    synthetic: bool,
    datasets: Iterable[str] = tuple(SYNTHETIC),
    force: bool = False,
    full_size: bool = False,
) -> None:
    """Make each dataset ready under `root` unless its manifest says it already is.

    `force` rebuilds it: a synthetic twin is generated from scratch; real data keeps its verified downloads (one that
    fails its checksum is fetched again) and is extracted and prepared again. `full_size` makes the CIFAR-10 and IMDB
    twins as large as the real sets (FULL_SIZE), so that a full-scale cell on them does the real amount of work
    (make gpu-check); a twin of another size is generated again.
    """
    for name in datasets:
        folder = Path(root) / name
        size = FULL_SIZE.get(name, {}) if synthetic and full_size else {}
        rebuild = force
        if (folder / "manifest.json").exists() and not force:
            manifest = json.loads((folder / "manifest.json").read_text())
            if all(manifest.get(key) == value for key, value in size.items()):
                print(f"{name}: ready in {folder}")
                continue
            rebuild = True  # a twin of another size
        if rebuild and folder.exists():
            if synthetic:
                shutil.rmtree(folder)
            else:
                (folder / "manifest.json").unlink(missing_ok=True)  # not ready until the rebuild has finished
        print(f"{name}: preparing {'synthetic' if synthetic else 'real'} data in {folder} …", flush=True)
        if synthetic:
            SYNTHETIC[name](root, **size)
        else:
            REAL[name](root, force=force)


def main(argv: Optional[Sequence[str]] = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m shared.datasets", description=__doc__.split("\n")[0])
    parser.add_argument("--root", required=True, help="data root, e.g. data/synthetic or data/real")
    kind = parser.add_mutually_exclusive_group(required=True)
    kind.add_argument("--synthetic", action="store_true", help="generate the small learnable twins")
    kind.add_argument("--real", action="store_true", help="download (checksum-verified) and prepare the real data")
    parser.add_argument(
        "--datasets",
        nargs="+",
        choices=list(SYNTHETIC),
        default=list(SYNTHETIC),
        help="only these datasets (default: all three)",
    )
    parser.add_argument(
        "--full-size",
        action="store_true",
        help="synthetic CIFAR-10 and IMDB as large as the real sets (default: small twins)",
    )
    parser.add_argument(
        "--force",
        action="store_true",
        help="rebuild even if present: regenerate a synthetic twin; re-extract and re-prepare real "
        "data from its verified downloads (fetching again any that fails its checksum)",
    )
    args = parser.parse_args(argv)
    try:
        prepare(args.root, args.synthetic, args.datasets, args.force, args.full_size)
    except DataError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
