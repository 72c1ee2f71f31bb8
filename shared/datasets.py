"""Datasets: checksum-verified downloads, their synthetic twins in the same on-disk formats, and the loaders.

Layout under a data root (`data/real`, `data/synthetic`, or `/data/...` in a container):
    cifar10/cifar-10-batches-py/{data_batch_1..5,test_batch}   the python pickles of the CIFAR-10 tarball
    imdb/imdb.npz                                              Keras' file: word ranks, labels
    chestxray14/raw/{images/*.png, Data_Entry_2017.csv}        NIH's files
    chestxray14/prepared/{images,labels,split}.npy             resized once to 264, split by patient
    */manifest.json                                            written last: a dataset without one is not ready

Run `python -m shared.datasets --root data/synthetic --synthetic` (tests, demo) or `--root data/real --real` (`make data`).
"""
import argparse
import hashlib
import json
import pickle
import shutil
import sys
import tarfile
import urllib.request
from pathlib import Path

import numpy as np

from shared import params
from shared.record import now, write_atomic

CIFAR_URL = "https://www.cs.toronto.edu/~kriz/cifar-10-python.tar.gz"
CIFAR_MD5 = "c58f30108f718f92721af3b95e74349a"  # published on the CIFAR-10 page
IMDB_URL = "https://storage.googleapis.com/tensorflow/tf-keras-datasets/imdb.npz"
IMDB_SHA256 = "69664113be75683a8fe16e3ed0ab59fda8886cb3cd7ada244f7d9544e4676b9f"  # the hash keras.datasets checks
# NIH publishes no checksums for the ChestX-ray14 archives: each is checked by reading it whole (gzip's CRC catches a
# corrupt or partial file) and the image count is checked against the CSV.
CHEST_BOX = "https://nihcc.box.com/shared/static/"
CHEST_ARCHIVES = [CHEST_BOX + key + ".gz" for key in (
    "vfk49d74nhbxq3nqjg0900w5nvkorp5c", "i28rlmbvmfjbl8p2n3ril0pptcmcu9d1", "f1t00wrtdk94satdfb9olcolqx20z2jp",
    "0aowwzs5lhjrceb3qp67ahp0rd1l1etg", "v5e3goj22zr6h8tzualxfsqlqaygfbsn", "asi7ikud9jwnkrnkj99jnpfkjdes7l6l",
    "jn1b4mw4n6lnh74ovmcjb8y48h8xj07n", "tvpxmn7qyrgl0w8wfh9kqfjskv6nmm1j", "upyy3ml7qdumlgk2rfcvlb9k6gvqq2pj",
    "l6nilvfa9cg3s28tqv1qc1olm3gnz54p", "hhq8fkdgvcari67vfhs7ppg2w6ni4jze", "ioqwiy20ihqwyr8pf4c24eazhh281pbu")]
CHEST_PAGE = "https://nihcc.app.box.com/v/ChestXray-NIHCC"
CHEST_LABELS = ("Atelectasis", "Cardiomegaly", "Effusion", "Infiltration", "Mass", "Nodule", "Pneumonia",
                "Pneumothorax", "Consolidation", "Edema", "Emphysema", "Fibrosis", "Pleural_Thickening", "Hernia")
CHEST_CSV = "Data_Entry_2017.csv"
CHEST_CSV_COLUMNS = ("Image Index", "Finding Labels", "Follow-up #", "Patient ID", "Patient Age", "Patient Gender",
                     "View Position", "OriginalImage[Width", "Height]", "OriginalImagePixelSpacing[x", "y]")


class DataError(Exception):
    """A dataset that is missing, partial or corrupt; the message says how to get a good one."""


# ---------------------------------------------------------------- downloads and manifests

def file_digest(path, algorithm):
    h = hashlib.new(algorithm)
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def verify(path, algorithm, expected):
    actual = file_digest(path, algorithm)
    if actual != expected:
        raise DataError(f"{path}: {algorithm} is {actual}, expected {expected}: the file is corrupt or partial; "
                        f"delete it and download again")


def download(url, dest, algorithm=None, expected=None, opener=urllib.request.urlopen):
    """Fetch `url` to `dest` once: resume a `.part` file where the server allows, verify, then rename into place.

    A file already at `dest` is verified, never trusted; a mismatch is an error, so nothing corrupt is ever used.
    """
    dest = Path(dest)
    if dest.exists():
        if expected:
            verify(dest, algorithm, expected)
        return dest
    dest.parent.mkdir(parents=True, exist_ok=True)
    part = dest.with_name(dest.name + ".part")
    have = part.stat().st_size if part.exists() else 0
    request = urllib.request.Request(url, headers={"Range": f"bytes={have}-"} if have else {})
    with opener(request) as response:
        resumed = have and getattr(response, "status", 200) == 206
        with open(part, "ab" if resumed else "wb") as f:  # a server that ignores Range restarts the file cleanly
            shutil.copyfileobj(response, f, 1 << 20)
    if expected:
        try:
            verify(part, algorithm, expected)
        except DataError:
            part.unlink()
            raise
    part.rename(dest)
    return dest


def write_manifest(folder, dataset, source, **extra):
    write_atomic(Path(folder) / "manifest.json",
                 json.dumps({"dataset": dataset, "source": source, "created_at": now(), **extra}, indent=2) + "\n")


def read_manifest(folder, dataset):
    path = Path(folder) / "manifest.json"
    if not path.exists():
        raise DataError(f"{dataset} is not prepared under {folder}: run `make data` for the real data or "
                        f"`python -m shared.datasets --root {Path(folder).parent} --synthetic` for the synthetic twin")
    return json.loads(path.read_text())


def data_source(root, task):
    """'real' or 'synthetic': what the record's `cell.data` says, read from the dataset's manifest."""
    if task == "resnet50":
        return "synthetic"  # random images by definition (DESIGN.md)
    dataset = params.task_params(task)["dataset"]
    try:
        return read_manifest(Path(root) / dataset, dataset)["source"]
    except (OSError, ValueError, KeyError) as e:
        raise DataError(f"cannot read the {dataset} manifest under {root}: {e}; check the data folder's "
                        f"permissions or prepare the data again") from e


# ---------------------------------------------------------------- CIFAR-10

def load_cifar10(root, train_samples=None, test_samples=None):
    """(x_train, y_train, x_test, y_test): float32 (N, 3, 32, 32) in [0, 1] and int32 labels."""
    folder = Path(root) / "cifar10"
    read_manifest(folder, "cifar10")
    batches = folder / "cifar-10-batches-py"

    def read(names):
        xs, ys = [], []
        for name in names:
            with open(batches / name, "rb") as f:
                d = pickle.load(f, encoding="bytes")
            xs.append(np.asarray(d[b"data"], np.uint8))
            ys.append(np.asarray(d[b"labels"], np.int32))
        return np.concatenate(xs), np.concatenate(ys)

    x_train, y_train = read([f"data_batch_{i}" for i in range(1, 6)])
    x_test, y_test = read(["test_batch"])
    x_train, y_train = x_train[:train_samples], y_train[:train_samples]
    x_test, y_test = x_test[:test_samples], y_test[:test_samples]
    scale = lambda x: (x.reshape(-1, 3, 32, 32).astype(np.float32) / 255.0)
    return scale(x_train), y_train, scale(x_test), y_test


def prepare_cifar10_real(root):
    folder = Path(root) / "cifar10"
    tarball = download(CIFAR_URL, folder / "cifar-10-python.tar.gz", "md5", CIFAR_MD5)
    with tarfile.open(tarball) as tar:
        tar.extractall(folder, filter="data")
    write_manifest(folder, "cifar10", "real", url=CIFAR_URL, md5=CIFAR_MD5)


def class_templates(rng, classes, shape, low=4):
    """Smooth random patterns, one per class: upsampled low-resolution noise, so labels carry learnable signal."""
    c, h, w = shape
    coarse = rng.uniform(-1, 1, (classes, c, low, low)).astype(np.float32)
    return coarse.repeat(h // low, axis=2).repeat(w // low, axis=3)


def make_cifar10_synthetic(root, train=5120, test=1024, seed=params.SEED):
    """The CIFAR-10 pickles with images = class template + noise (learnable, seeded, small)."""
    folder = Path(root) / "cifar10"
    out = folder / "cifar-10-batches-py"
    out.mkdir(parents=True, exist_ok=True)
    rng = np.random.default_rng(seed)
    templates = class_templates(rng, 10, (3, 32, 32))

    def images(n):
        y = rng.integers(0, 10, n)
        x = 0.5 + 0.45 * templates[y] + rng.normal(0, 0.15, (n, 3, 32, 32))
        return (np.clip(x, 0, 1) * 255).astype(np.uint8).reshape(n, -1), y

    x, y = images(train)
    for i, idx in enumerate(np.array_split(np.arange(train), 5), start=1):
        pickle_to(out / f"data_batch_{i}", {b"data": x[idx], b"labels": y[idx].tolist()})
    x, y = images(test)
    pickle_to(out / "test_batch", {b"data": x, b"labels": y.tolist()})
    write_manifest(folder, "cifar10", "synthetic", seed=seed, train=train, test=test)


def pickle_to(path, obj):
    path.write_bytes(pickle.dumps(obj, protocol=2))


# ---------------------------------------------------------------- IMDB

def load_imdb(root, max_features, maxlen, train_samples=None, test_samples=None,
              start_char=1, oov_char=2, index_from=3):
    """(x_train, y_train, x_test, y_test): int32 (N, maxlen) word ids in the Keras convention, int32 labels.

    Word ids are start 1, OOV 2, rank r -> r + 3, ids >= max_features -> OOV; sequences padded with 0 and truncated
    at the front (Keras `pad_sequences` defaults), so the last time step is the end of the review.
    """
    folder = Path(root) / "imdb"
    read_manifest(folder, "imdb")
    with np.load(folder / "imdb.npz", allow_pickle=True) as f:  # Keras' file holds ragged lists as object arrays
        splits = [(f["x_train"][:train_samples], f["y_train"][:train_samples]),
                  (f["x_test"][:test_samples], f["y_test"][:test_samples])]
    out = []
    for seqs, labels in splits:
        x = np.zeros((len(seqs), maxlen), np.int32)
        for i, seq in enumerate(seqs):
            ids = np.concatenate([[start_char], np.asarray(seq, np.int64) + index_from])
            ids[ids >= max_features] = oov_char
            ids = ids[-maxlen:]
            x[i, maxlen - len(ids):] = ids
        out += [x, np.asarray(labels, np.int32)]
    return tuple(out)


def prepare_imdb_real(root):
    folder = Path(root) / "imdb"
    download(IMDB_URL, folder / "imdb.npz", "sha256", IMDB_SHA256)
    write_manifest(folder, "imdb", "real", url=IMDB_URL, sha256=IMDB_SHA256)


def make_imdb_synthetic(root, train=5120, test=1024, vocabulary=40_000, seed=params.SEED):
    """imdb.npz with reviews of random word ranks where sentiment words are sprinkled by label (learnable)."""
    folder = Path(root) / "imdb"
    folder.mkdir(parents=True, exist_ok=True)
    rng = np.random.default_rng(seed)
    sentiment_words = {0: np.arange(10, 20), 1: np.arange(20, 30)}  # frequent ranks, so they stay in the vocabulary

    def reviews(n):
        y = rng.integers(0, 2, n)
        xs = np.empty(n, dtype=object)
        for i in range(n):
            length = int(rng.integers(20, 300))
            seq = rng.integers(1, vocabulary, length)  # ranks >= 30,000 - 3 exercise the OOV mapping
            marks = rng.random(length) < 0.2
            seq[marks] = rng.choice(sentiment_words[int(y[i])], int(marks.sum()))
            xs[i] = seq.tolist()
        return xs, y

    x_train, y_train = reviews(train)
    x_test, y_test = reviews(test)
    tmp = folder / "imdb.tmp.npz"
    np.savez(tmp, x_train=x_train, y_train=y_train, x_test=x_test, y_test=y_test)
    tmp.rename(folder / "imdb.npz")
    write_manifest(folder, "imdb", "synthetic", seed=seed, train=train, test=test)


# ---------------------------------------------------------------- ChestX-ray14

def chest_labels(finding_labels):
    """'Effusion|Mass' -> 14-element multi-hot float32 in CHEST_LABELS order ('No Finding' is all zeros)."""
    found = set(finding_labels.split("|"))
    return np.array([name in found for name in CHEST_LABELS], np.float32)


def split_by_patient(patient_ids, fractions, seed=params.SEED):
    """0/1/2 (train/valid/test) per image; all images of a patient land in the same split, so no patient leaks."""
    patients = np.unique(patient_ids)
    np.random.default_rng(seed).shuffle(patients)
    cuts = np.cumsum(np.asarray(fractions[:2]) * len(patients)).round().astype(int)
    which = np.zeros(len(patients), np.int8)
    which[cuts[0]:cuts[1]] = 1
    which[cuts[1]:] = 2
    lookup = dict(zip(patients.tolist(), which.tolist()))
    return np.array([lookup[p] for p in np.asarray(patient_ids).tolist()], np.int8)


def prepare_chestxray(root, size=params.DENSENET121["stored_size"]):
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
        raise DataError(f"{len(missing)} of {len(rows)} images listed in {CHEST_CSV} are missing under {images_dir} "
                        f"(first: {missing[0]}); re-run the download (`make data`)")
    out = folder / "prepared"
    out.mkdir(parents=True, exist_ok=True)
    tmp = out / "images.tmp.npy"
    images = np.lib.format.open_memmap(tmp, mode="w+", dtype=np.uint8, shape=(len(rows), size, size))
    for i, row in enumerate(rows):
        with Image.open(images_dir / row["Image Index"]) as im:
            images[i] = np.asarray(im.convert("L").resize((size, size), Image.BILINEAR))
    images.flush()
    del images
    np.save(out / "labels.npy", np.stack([chest_labels(r["Finding Labels"]) for r in rows]))
    np.save(out / "split.npy", split_by_patient([int(r["Patient ID"]) for r in rows], params.DENSENET121["split"]))
    tmp.rename(out / "images.npy")
    return len(rows)


def prepare_chestxray_real(root):
    folder = Path(root) / "chestxray14"
    raw = folder / "raw"
    for i, url in enumerate(CHEST_ARCHIVES, start=1):
        archive = download(url, raw / f"images_{i:03d}.tar.gz")
        try:
            with tarfile.open(archive) as tar:  # reading it whole checks gzip's CRC
                tar.extractall(raw, filter="data")
        except (tarfile.TarError, EOFError, OSError) as e:
            archive.unlink()
            raise DataError(f"{archive} is corrupt or partial ({e}); deleted it, run `make data` again") from e
    n = prepare_chestxray(root)
    write_manifest(folder, "chestxray14", "real", images=n, page=CHEST_PAGE)


def make_chestxray_synthetic(root, n=640, size=300, seed=params.SEED):
    """PNG images + Data_Entry_2017.csv where each finding draws a bright blob at its own place (learnable)."""
    from PIL import Image

    folder = Path(root) / "chestxray14"
    images_dir = folder / "raw" / "images"
    images_dir.mkdir(parents=True, exist_ok=True)
    rng = np.random.default_rng(seed)
    yy, xx = np.mgrid[0:size, 0:size] / size
    centers = rng.uniform(0.2, 0.8, (len(CHEST_LABELS), 2))
    rows = []
    for i in range(n):
        present = rng.random(len(CHEST_LABELS)) < 0.15
        img = rng.normal(0.35, 0.08, (size, size))
        for (cy, cx) in centers[present]:
            img += 0.5 * np.exp(-((yy - cy) ** 2 + (xx - cx) ** 2) / 0.004)
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
    write_manifest(folder, "chestxray14", "synthetic", seed=seed, images=n)


class ChestXray:
    """The prepared ChestX-ray14 split as uint8 images (memory-mapped) and multi-hot labels."""

    def __init__(self, root, split, samples=None, stored_size=params.DENSENET121["stored_size"]):
        folder = Path(root) / "chestxray14"
        read_manifest(folder, "chestxray14")
        prepared = folder / "prepared"
        which = {"train": 0, "valid": 1, "test": 2}[split]
        index = np.flatnonzero(np.load(prepared / "split.npy") == which)[:samples]
        self.images = np.load(prepared / "images.npy", mmap_mode="r")
        self.labels = np.load(prepared / "labels.npy")[index]
        self.index = index
        have = self.images.shape[1]
        # Smaller scales shrink the stored images once, in memory (nearest neighbour), instead of a second copy on disk.
        self.pixels = None if stored_size == have else np.linspace(0, have - 1, stored_size).round().astype(int)
        if self.pixels is not None:
            self.images = self.images[index][:, self.pixels[:, None], self.pixels[None, :]]
            self.index = np.arange(len(index))

    def __len__(self):
        return len(self.index)

    def batch(self, idx, crop, rng=None):
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
            patch = raw[i, top[i]:top[i] + crop, left[i]:left[i] + crop]
            out[i] = patch[:, ::-1] if flip[i] else patch
        out /= 255.0
        mean = np.asarray(params.DENSENET121["imagenet_mean"], np.float32)[:, None, None]
        std = np.asarray(params.DENSENET121["imagenet_std"], np.float32)[:, None, None]
        return (out[:, None] - mean) / std, self.labels[idx]


def random_images(n, size, seed=params.SEED):
    """The ResNet-50 input: `n` random images (n, 3, size, size) float32, ImageNet-like range."""
    return np.random.default_rng(seed).standard_normal((n, 3, size, size), dtype=np.float32)


# ---------------------------------------------------------------- CLI

SYNTHETIC = {"cifar10": make_cifar10_synthetic, "imdb": make_imdb_synthetic, "chestxray14": make_chestxray_synthetic}
REAL = {"cifar10": prepare_cifar10_real, "imdb": prepare_imdb_real, "chestxray14": prepare_chestxray_real}


def prepare(root, synthetic, datasets=tuple(SYNTHETIC), force=False):
    """Make each dataset ready under `root` unless its manifest says it already is."""
    for name in datasets:
        folder = Path(root) / name
        if (folder / "manifest.json").exists() and not force:
            print(f"{name}: ready in {folder}")
            continue
        if force and folder.exists() and synthetic:
            shutil.rmtree(folder)
        print(f"{name}: preparing {'synthetic' if synthetic else 'real'} data in {folder} …", flush=True)
        (SYNTHETIC if synthetic else REAL)[name](root)


def main(argv=None):
    parser = argparse.ArgumentParser(prog="python -m shared.datasets", description=__doc__.split("\n")[0])
    parser.add_argument("--root", required=True, help="data root, e.g. data/synthetic or data/real")
    kind = parser.add_mutually_exclusive_group(required=True)
    kind.add_argument("--synthetic", action="store_true", help="generate the small learnable twins")
    kind.add_argument("--real", action="store_true", help="download (checksum-verified) and prepare the real data")
    parser.add_argument("--datasets", nargs="+", choices=list(SYNTHETIC), default=list(SYNTHETIC))
    parser.add_argument("--force", action="store_true", help="regenerate synthetic data even if present")
    args = parser.parse_args(argv)
    try:
        prepare(args.root, args.synthetic, args.datasets, args.force)
    except DataError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
