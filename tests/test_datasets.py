"""Data: checksum-verified resumable downloads, the Keras IMDB convention, the patient split, the shared order."""

import hashlib
import io
import json
import shutil
import types

import numpy as np
import pytest

from shared import batching, datasets, params, runner

pytestmark = pytest.mark.unit


class FakeResponse(io.BytesIO):
    def __init__(self, data, status=200):
        super().__init__(data)
        self.status = status

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        return False


def opener_serving(payload, honour_range=True):
    def opener(request):
        start = int(request.get_header("Range", "bytes=0-")[6:-1] or 0)
        if start and honour_range:
            return FakeResponse(payload[start:], status=206)
        return FakeResponse(payload)

    return opener


PAYLOAD = bytes(range(256)) * 64
SHA = hashlib.sha256(PAYLOAD).hexdigest()


def test_download_verifies_and_renames(tmp_path):
    dest = datasets.download("http://x/f", tmp_path / "f.bin", "sha256", SHA, opener=opener_serving(PAYLOAD))
    assert dest.read_bytes() == PAYLOAD and not (tmp_path / "f.bin.part").exists()


def test_corrupt_download_is_detected_and_never_used(tmp_path):
    corrupt = PAYLOAD[:-1] + b"!"
    with pytest.raises(datasets.DataError, match="sha256 is .* expected .*corrupt or partial"):
        datasets.download("http://x/f", tmp_path / "f.bin", "sha256", SHA, opener=opener_serving(corrupt))
    assert not (tmp_path / "f.bin").exists() and not (tmp_path / "f.bin.part").exists()


def test_partial_download_resumes_where_the_server_allows(tmp_path):
    (tmp_path / "f.bin.part").write_bytes(PAYLOAD[:1000])
    datasets.download("http://x/f", tmp_path / "f.bin", "sha256", SHA, opener=opener_serving(PAYLOAD))
    assert (tmp_path / "f.bin").read_bytes() == PAYLOAD


def test_partial_download_restarts_when_the_server_ignores_range(tmp_path):
    (tmp_path / "f.bin.part").write_bytes(b"garbage" * 10)
    datasets.download(
        "http://x/f", tmp_path / "f.bin", "sha256", SHA, opener=opener_serving(PAYLOAD, honour_range=False)
    )
    assert (tmp_path / "f.bin").read_bytes() == PAYLOAD


def test_an_existing_file_is_verified_not_trusted(tmp_path):
    (tmp_path / "f.bin").write_bytes(b"tampered")
    with pytest.raises(datasets.DataError):
        datasets.download("http://x/f", tmp_path / "f.bin", "sha256", SHA, opener=opener_serving(PAYLOAD))


def test_a_file_nobody_publishes_a_hash_of_is_pinned_when_first_downloaded(tmp_path):
    """ChestX-ray14's archives: trust on first use. The first download's SHA-256 is kept; the same file again is
    fine; a file changed on the disk, or another file from the server, is refused and never used."""
    pins, dest = tmp_path / "pins.json", tmp_path / "images_001.tar.gz"
    serving = {"payload": PAYLOAD}
    opener = lambda request: opener_serving(serving["payload"])(request)
    assert datasets.pinned_download("http://x/a", dest, pins, opener) == (dest, SHA)
    assert json.loads(pins.read_text()) == {"images_001.tar.gz": SHA}
    assert datasets.pinned_download("http://x/a", dest, pins, opener) == (dest, SHA)  # the same file: fine
    dest.write_bytes(PAYLOAD[:-1] + b"!")  # changed on the disk
    with pytest.raises(datasets.DataError, match="pinned in .*pins.json when first downloaded"):
        datasets.pinned_download("http://x/a", dest, pins, opener)
    dest.unlink()
    serving["payload"] = PAYLOAD[::-1]  # the server's file changed
    with pytest.raises(datasets.DataError, match="another file"):
        datasets.pinned_download("http://x/a", dest, pins, opener)
    assert not dest.exists() and json.loads(pins.read_text()) == {"images_001.tar.gz": SHA}
    pins.write_text("[1, 2]")
    with pytest.raises(datasets.DataError, match="not a readable list of pinned hashes"):
        datasets.pinned_download("http://x/a", dest, pins, opener)


def test_missing_dataset_says_how_to_get_it(tmp_path):
    with pytest.raises(datasets.DataError, match="make data.*--synthetic"):
        datasets.load_cifar10(tmp_path)


def test_cifar_synthetic_format_and_scaling(synthetic_data):
    x_train, y_train, x_test, y_test = datasets.load_cifar10(synthetic_data, 100, 50)
    assert x_train.shape == (100, 3, 32, 32) and x_train.dtype == np.float32
    assert 0 <= x_train.min() and x_train.max() <= 1 and set(np.unique(y_train)) <= set(range(10))
    assert x_test.shape == (50, 3, 32, 32) and y_test.dtype == np.int32


def test_imdb_follows_the_keras_convention(tmp_path):
    folder = tmp_path / "imdb"
    folder.mkdir()
    seqs = np.empty(2, dtype=object)
    seqs[0], seqs[1] = [5, 29_998, 7], list(range(1, 11))
    np.savez(folder / "imdb.npz", x_train=seqs, y_train=np.array([0, 1]), x_test=seqs, y_test=np.array([0, 1]))
    datasets.write_manifest(folder, "imdb", "synthetic")
    x, y, _, _ = datasets.load_imdb(tmp_path, max_features=30_000, maxlen=6)
    # start 1, rank r -> r + 3, ids >= 30,000 -> OOV 2; zero padding in front
    assert x[0].tolist() == [0, 0, 1, 8, 2, 10]
    # truncation keeps the end of the review: the last 6 of [1, 4..13]
    assert x[1].tolist() == [8, 9, 10, 11, 12, 13]


def test_chestxray_split_is_by_patient_and_labels_are_multi_hot(synthetic_data):
    train = datasets.ChestXray(synthetic_data, "train")
    test = datasets.ChestXray(synthetic_data, "test")
    split = np.load(synthetic_data / "chestxray14" / "prepared" / "split.npy")
    assert abs((split == 0).mean() - 0.7) < 0.05 and abs((split == 2).mean() - 0.2) < 0.05
    patients = np.arange(len(split)) // 2 + 1  # how the synthetic CSV numbers patients
    assert not set(patients[split == 0]) & set(patients[split == 2])
    assert train.labels.shape[1] == 14 and set(np.unique(train.labels)) <= {0.0, 1.0}
    x, y = train.batch(np.arange(4), 224, np.random.default_rng(0))
    assert x.shape == (4, 3, 224, 224) and x.dtype == np.float32 and y.shape == (4, 14)
    assert len(test) > 0


def test_chest_labels():
    assert datasets.chest_labels("No Finding").sum() == 0
    v = datasets.chest_labels("Effusion|Hernia")
    assert v[datasets.CHEST_LABELS.index("Effusion")] == 1 and v[13] == 1 and v.sum() == 2


def test_one_shared_order_sharded_over_ranks():
    a = list(batching.train_batches(1000, 64, epoch=3))
    assert [x.tolist() for x in a] == [x.tolist() for x in batching.train_batches(1000, 64, epoch=3)]
    assert a[0].tolist() != next(batching.train_batches(1000, 64, epoch=4)).tolist()  # reshuffled every epoch
    assert len(a) == 15 and all(len(b) == 64 for b in a)  # the last partial batch is dropped in training
    ranks = [list(batching.train_batches(1000, 32, epoch=3, rank=r, world=2)) for r in range(2)]
    merged = [np.concatenate([ranks[0][i], ranks[1][i]]) for i in range(len(ranks[0]))]
    assert [m.tolist() for m in merged] == [b.tolist() for b in a]  # the ranks split each global batch


def test_evaluation_covers_every_sample():
    batches = list(batching.eval_batches(130, 64))
    assert np.concatenate(batches).tolist() == list(range(130)) and len(batches[-1]) == 2


def test_params_json_is_in_sync():
    assert params.JSON_PATH.read_text() == params.as_json(), "run `python -m shared.params`"


# ---------------------------------------------------------------- damaged files: which file, which dataset, the fix

LOADERS = {
    "cifar10": lambda root: datasets.load_cifar10(root),
    "imdb": lambda root: datasets.load_imdb(root, 30_000, 40),
    "chestxray14": lambda root: datasets.ChestXray(root, "train", stored_size=40),
}
FILES = [
    ("cifar10", "cifar-10-batches-py/data_batch_3"),
    ("cifar10", "cifar-10-batches-py/test_batch"),
    ("imdb", "imdb.npz"),
    ("chestxray14", "prepared/images.npy"),
    ("chestxray14", "prepared/labels.npy"),
    ("chestxray14", "prepared/split.npy"),
]


@pytest.fixture(scope="module")
def small_twins(tmp_path_factory):
    """Small synthetic twins of the three datasets, generated once; tests damage their own copies."""
    root = tmp_path_factory.mktemp("small") / "data"
    datasets.make_cifar10_synthetic(root, train=50, test=10)
    datasets.make_imdb_synthetic(root, train=20, test=10)
    datasets.make_chestxray_synthetic(root, n=20, size=64)
    return root


@pytest.fixture
def twins(small_twins, tmp_path):
    root = tmp_path / "data"
    shutil.copytree(small_twins, root)
    return root


def assert_names_file_and_fix(error, root, dataset, path, source="synthetic"):
    message = str(error.value)
    assert message.startswith(f"{dataset}: ") and str(path) in message, message
    assert f"python -m shared.datasets --root {root} --{source} --datasets {dataset} --force" in message, message


def forget_sizes(root, dataset):
    """A manifest written before sizes were recorded: damage is then found by parsing, not by the size check."""
    manifest = root / dataset / "manifest.json"
    manifest.write_text(json.dumps({k: v for k, v in json.loads(manifest.read_text()).items() if k != "files"}))


@pytest.mark.parametrize("dataset, name", FILES)
@pytest.mark.parametrize("damage", ["truncated", "truncated, no recorded size", "overwritten", "missing"])
def test_a_damaged_file_names_dataset_file_and_fix(twins, dataset, name, damage):
    path = twins / dataset / name
    data = path.read_bytes()
    if damage == "missing":
        path.unlink()
    elif damage == "overwritten":  # same size, so only reading it can tell
        path.write_bytes(bytes(np.random.default_rng(0).integers(0, 256, len(data), np.uint8)))
    else:
        path.write_bytes(data[: len(data) // 2])
        if damage == "truncated, no recorded size":
            forget_sizes(twins, dataset)
    with pytest.raises(datasets.DataError) as error:
        LOADERS[dataset](twins)
    assert_names_file_and_fix(error, twins, dataset, path)
    assert ("missing" if damage == "missing" else "damaged") in str(error.value)


def test_the_advised_command_rebuilds_the_dataset(twins):
    path = twins / "cifar10" / "cifar-10-batches-py" / "data_batch_1"
    path.write_bytes(path.read_bytes()[:100])
    with pytest.raises(datasets.DataError) as error:
        datasets.load_cifar10(twins)
    command = str(error.value).split("`")[1].split()
    assert command[:3] == ["python", "-m", "shared.datasets"]
    assert datasets.main(command[3:]) == 0
    assert datasets.load_cifar10(twins)[0].shape == (5120, 3, 32, 32)


def rewrite(root, dataset, name, save):
    """Replace a file with a well-formed one of the wrong shape, and record its size as the manifest would."""
    path = root / dataset / name
    save(path)
    manifest = root / dataset / "manifest.json"
    content = json.loads(manifest.read_text())
    content["files"][name] = path.stat().st_size
    manifest.write_text(json.dumps(content))
    return path


WRONG_SHAPES = [
    (
        "cifar10",
        "cifar-10-batches-py/data_batch_2",
        "expected uint8\\[N, 3072\\]",
        lambda p: datasets.pickle_to(p, {b"data": np.zeros((10, 32, 32, 3), np.uint8), b"labels": [0] * 10}),
    ),
    (
        "cifar10",
        "cifar-10-batches-py/test_batch",
        "labels outside 0..9",
        lambda p: datasets.pickle_to(p, {b"data": np.zeros((2, 3072), np.uint8), b"labels": [3, 10]}),
    ),
    (
        "cifar10",
        "cifar-10-batches-py/test_batch",
        "KeyError",
        lambda p: datasets.pickle_to(p, {b"images": np.zeros((2, 3072), np.uint8)}),
    ),
    ("imdb", "imdb.npz", "KeyError", lambda p: np.savez(open(p, "wb"), x_train=np.zeros(3))),
    (
        "imdb",
        "imdb.npz",
        "of 0/1",
        lambda p: np.savez(
            open(p, "wb"), x_train=np.zeros((2, 5)), y_train=np.zeros(2), x_test=np.zeros(1), y_test=np.array([2])
        ),
    ),
    (
        "chestxray14",
        "prepared/images.npy",
        "expected uint8\\[N, S, S\\]",
        lambda p: np.save(p, np.zeros((20, 264, 200), np.uint8)),
    ),
    (
        "chestxray14",
        "prepared/labels.npy",
        "expected \\[20, 14\\]",
        lambda p: np.save(p, np.zeros((19, 14), np.float32)),
    ),
    ("chestxray14", "prepared/split.npy", "of 0/1/2", lambda p: np.save(p, np.full(20, 3, np.int8))),
]


@pytest.mark.parametrize("dataset, name, problem, save", WRONG_SHAPES)
def test_a_wrong_shaped_file_names_dataset_file_and_fix(twins, dataset, name, problem, save):
    path = rewrite(twins, dataset, name, save)
    with pytest.raises(datasets.DataError, match=problem) as error:
        LOADERS[dataset](twins)
    assert_names_file_and_fix(error, twins, dataset, path)


@pytest.mark.parametrize("dataset", list(LOADERS))
def test_a_damaged_manifest_names_both_fixes(twins, dataset):
    path = twins / dataset / "manifest.json"
    path.write_text(path.read_text()[:20])
    with pytest.raises(datasets.DataError) as error:
        LOADERS[dataset](twins)
    assert_names_file_and_fix(error, twins, dataset, path, "real")
    assert_names_file_and_fix(error, twins, dataset, path, "synthetic")


def test_real_data_advises_the_real_rebuild(twins):
    manifest = twins / "imdb" / "manifest.json"
    manifest.write_text(manifest.read_text().replace('"synthetic"', '"real"'))
    (twins / "imdb" / "imdb.npz").write_bytes(b"PK\x03\x04 truncated")
    forget_sizes(twins, "imdb")
    with pytest.raises(datasets.DataError) as error:
        datasets.load_imdb(twins, 30_000, 40)
    assert_names_file_and_fix(error, twins, "imdb", twins / "imdb" / "imdb.npz", "real")


def test_force_refetches_a_real_download_that_fails_its_checksum(tmp_path):
    (tmp_path / "f.bin").write_bytes(b"tampered")
    datasets.download(
        "http://x/f", tmp_path / "f.bin", "sha256", SHA, opener=opener_serving(PAYLOAD), replace_corrupt=True
    )
    assert (tmp_path / "f.bin").read_bytes() == PAYLOAD


def test_a_damaged_file_found_by_a_runner_ends_failed_with_the_fix(twins, tmp_path):
    """shared.runner turns the DataError a task's load_data raises into a failed record that says what to do."""
    (twins / "cifar10" / "cifar-10-batches-py" / "test_batch").write_bytes(b"\x80\x02}q\x00")
    cfg = runner.RunConfig(framework="pytorch", task="cnn", data=twins, out=tmp_path / "r.json", scale="tiny")
    task = types.SimpleNamespace(main=lambda cfg: datasets.load_cifar10(cfg.data))
    assert runner.run(cfg, lambda cfg: task, lambda: {}) == 1
    record = json.loads((tmp_path / "r.json").read_text())
    assert record["status"] == "failed" and record["cell"]["data"] == "synthetic"
    assert record["reason"].startswith("DataError: cifar10: ") and "test_batch" in record["reason"]
    assert "--synthetic --datasets cifar10 --force" in record["reason"]
