"""Data: checksum-verified resumable downloads, the Keras IMDB convention, the patient split, the shared order."""
import hashlib
import io

import numpy as np
import pytest

from shared import batching, datasets, params


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
    datasets.download("http://x/f", tmp_path / "f.bin", "sha256", SHA,
                      opener=opener_serving(PAYLOAD, honour_range=False))
    assert (tmp_path / "f.bin").read_bytes() == PAYLOAD


def test_an_existing_file_is_verified_not_trusted(tmp_path):
    (tmp_path / "f.bin").write_bytes(b"tampered")
    with pytest.raises(datasets.DataError):
        datasets.download("http://x/f", tmp_path / "f.bin", "sha256", SHA, opener=opener_serving(PAYLOAD))


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
