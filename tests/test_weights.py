"""The `weights` step without the network: a local HTTP server serves small .pth files that torch writes here with
torchvision's naming, in all three formats torch.save has used; download, hash check, conversion and the corrupt-file
path are tested against them, and canonical.load then finds the ImageNet weights."""

import functools
import hashlib
import http.server
import json
import pickle
import subprocess
import threading

import numpy as np
import pytest
from conftest import framework_python

from shared import canonical, weights
from shared.datasets import DataError

BN = ("weight", "bias", "running_mean", "running_var")
# Tiny stand-ins for canonical.SHAPES with the real names: a stem, one block, one projection / transition.
TINY = {
    "resnet50": {
        "conv1.weight": (4, 3, 3, 3),
        **{f"bn1.{a}": (4,) for a in BN},
        "layer1.0.conv1.weight": (2, 4, 1, 1),
        **{f"layer1.0.bn1.{a}": (2,) for a in BN},
        "layer1.0.downsample.0.weight": (8, 4, 1, 1),
        **{f"layer1.0.downsample.1.{a}": (8,) for a in BN},
    },
    "densenet121": {
        "features.conv0.weight": (4, 3, 3, 3),
        **{f"features.norm0.{a}": (4,) for a in BN},
        **{f"features.denseblock1.denselayer1.norm1.{a}": (4,) for a in BN},
        "features.denseblock1.denselayer1.conv1.weight": (8, 4, 1, 1),
        **{f"features.denseblock1.denselayer1.norm2.{a}": (8,) for a in BN},
        "features.denseblock1.denselayer1.conv2.weight": (2, 8, 3, 3),
        **{f"features.transition1.norm.{a}": (6,) for a in BN},
        "features.transition1.conv.weight": (3, 6, 1, 1),
        "classifier.weight": (14, 3),
        "classifier.bias": (14,),
    },
}

# Runs in the pytorch environment: writes each task's tiny state dict as torchvision publishes it (DenseNet's old
# `norm.1` keys, 1000-way heads, a BN step counter), with tensors that share a storage at an offset and one that is
# transposed (non-contiguous), in the zip format, the pre-1.6 pickle stream and the first releases' tar archive;
# torch.load reads each back to prove the files are what torch itself would read; the numbers go to expected.npz.
WRITER = r'''
import io, json, pickle, re, struct, sys, tarfile, torch
from pathlib import Path
out, tiny = Path(sys.argv[1]), json.loads(sys.argv[2])
torch.manual_seed(0)

def published(task, shapes):
    base = torch.randn(1000)                              # one storage, several tensors at offsets into it
    state, used = {}, 0
    for name, shape in shapes.items():
        if name.startswith("classifier"):
            continue
        if task == "densenet121":
            name = re.sub(r"(denselayer\d+\.(?:norm|conv))([12])\.", r"\1.\2.", name)   # the pre-0.4 keys
        n = torch.Size(shape).numel()
        if len(shape) == 4 and shape[2:] == [1, 1]:       # transposed: strides that are not row-major
            state[name] = torch.randn(shape[1], shape[0]).t()[:, :, None, None]
        else:
            state[name] = base[used:used + n].view(shape)
            used += n + 3
    state["fc.weight" if task == "resnet50" else "classifier.weight"] = torch.randn(7, 5)
    state["fc.bias" if task == "resnet50" else "classifier.bias"] = torch.randn(7)
    state["bn1.num_batches_tracked" if task == "resnet50" else "features.norm0.num_batches_tracked"] = torch.tensor(42)
    return state

def save_tar(state, path):
    """torch's first format (what torch.serialization._legacy_load reads from a tar archive)."""
    roots, tensors = {}, {}
    for t in state.values():
        roots.setdefault(t.untyped_storage().data_ptr(), (len(roots), t))
    storages, views = io.BytesIO(), [(100, 0, 2, 400)]    # one storage view: 400 elements of storage 0 from 2 on
    pickle.dump(len(roots), storages, protocol=2)
    for key, t in roots.values():
        data = torch.empty(0, dtype=t.dtype).set_(t.untyped_storage())
        kind = torch.LongStorage if t.dtype == torch.long else torch.FloatStorage
        pickle.dump((key, "cpu", kind), storages, protocol=2)
        storages.write(struct.pack("<q", data.numel()) + data.numpy().tobytes())
    pickle.dump(views, storages, protocol=2)
    body = io.BytesIO()
    pickle.dump(len(state), body, protocol=2)
    for i, (name, t) in enumerate(state.items()):
        storage, offset = roots[t.untyped_storage().data_ptr()][0], t.storage_offset()
        if storage == 0 and 2 <= offset and offset + t.numel() <= 402 and t.is_contiguous():
            storage, offset = 100, offset - 2              # address it through the view
        tensors[id(t)] = 1000 + i
        pickle.dump((1000 + i, storage, torch.FloatTensor), body, protocol=2)
        body.write(struct.pack("<ii", t.dim(), 0) + struct.pack(f"<{t.dim()}q", *t.shape)
                   + struct.pack(f"<{t.dim()}q", *t.stride()) + struct.pack("<q", offset))

    class Pickler(pickle.Pickler):
        def persistent_id(self, obj):
            return str(tensors[id(obj)]) if isinstance(obj, torch.Tensor) else None
    main = io.BytesIO()
    Pickler(main, protocol=2).dump(state)
    with tarfile.open(path, "w:") as tar:
        for member, buffer in (("storages", storages), ("tensors", body), ("pickle", main)):
            info = tarfile.TarInfo(member)
            info.size = len(buffer.getvalue())
            tar.addfile(info, io.BytesIO(buffer.getvalue()))

expected = {}
for task, shapes in tiny.items():
    state = published(task, shapes)
    for fmt in ("zip", "legacy", "tar"):
        path = out / f"{task}.{fmt}.pth"
        if fmt == "tar":
            save_tar(state, path)
        else:
            torch.save(state, path, _use_new_zipfile_serialization=fmt == "zip")
        back = torch.load(path, weights_only=False)
        assert back.keys() == state.keys() and all(torch.equal(back[k], v) for k, v in state.items()), fmt
    expected.update({f"{task}/{k}": v.numpy() for k, v in state.items()})
import numpy as np
np.savez(out / "expected.npz", **expected)
'''


@pytest.fixture(scope="module")
def published(tmp_path_factory):
    """{(task, format): .pth path} and the numbers torch saved, {task: {name: array}}."""
    folder = tmp_path_factory.mktemp("pth")
    proc = subprocess.run(
        [str(framework_python("pytorch")), "-c", WRITER, str(folder), json.dumps(TINY)],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    with np.load(folder / "expected.npz") as f:
        expected = {task: {k.split("/", 1)[1]: f[k] for k in f.files if k.startswith(task + "/")} for task in TINY}
    return {(task, fmt): folder / f"{task}.{fmt}.pth" for task in TINY for fmt in ("zip", "legacy", "tar")}, expected


class Server:
    """A local HTTP server over one folder that counts the requests it answers."""

    def __init__(self, folder):
        self.requests = []
        server = self

        class Handler(http.server.SimpleHTTPRequestHandler):
            def do_GET(self):
                server.requests.append(self.path)
                super().do_GET()

            def log_message(self, *args):
                pass

        self.httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), functools.partial(Handler, directory=folder))
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}"
        threading.Thread(target=self.httpd.serve_forever, daemon=True).start()


@pytest.fixture
def server(tmp_path):
    s = Server(tmp_path / "www")
    (tmp_path / "www").mkdir()
    yield s
    s.httpd.shutdown()
    s.httpd.server_close()


def publish(server, tmp_path, monkeypatch, task, pth, prefix=None):
    """Serve `pth` under torchvision's naming (its SHA-256 prefix, or `prefix`) and point SOURCES at it."""
    data = pth.read_bytes()
    name = f"{task}-{prefix or hashlib.sha256(data).hexdigest()[:8]}.pth"
    (tmp_path / "www" / name).write_bytes(data)
    monkeypatch.setitem(weights.SOURCES, task, f"{server.url}/{name}")
    monkeypatch.setitem(canonical.SHAPES, task, TINY[task])
    return name


def canonical_name(name):
    return weights.DENSENET_OLD_KEY.sub(r"\1\2", name)


@pytest.mark.framework
@pytest.mark.parametrize("fmt", ["zip", "legacy", "tar"])
@pytest.mark.parametrize("task", list(TINY))
def test_read_pth_gives_what_torch_saved(published, task, fmt):
    files, expected = published
    state = weights.read_pth(files[task, fmt])
    assert state.keys() == expected[task].keys()
    for name, array in expected[task].items():
        assert state[name].dtype == array.dtype and state[name].shape == array.shape, name
        np.testing.assert_array_equal(state[name], array, err_msg=name)


@pytest.mark.framework
@pytest.mark.parametrize("task", list(TINY))
def test_download_check_convert_then_load(published, server, tmp_path, monkeypatch, task):
    files, expected = published
    name = publish(server, tmp_path, monkeypatch, task, files[task, "zip"])
    root = tmp_path / "data"
    assert weights.main(["--root", str(root), "--tasks", task]) == 0
    assert server.requests == [f"/{name}"]
    stored = np.load(canonical.weights_path(root, task))
    assert set(stored.files) == set(TINY[task]) - set(canonical.HEADS.get(task, ()))
    for old, array in expected[task].items():
        new = canonical_name(old)
        if new in stored.files:
            np.testing.assert_array_equal(stored[new], array.astype(np.float32), err_msg=new)
    manifest = json.loads((root / "weights" / "manifest.json").read_text())["tasks"][task]
    assert manifest["url"] == weights.SOURCES[task] and manifest["sha256"].startswith(name.split("-")[1][:8])

    loaded, source = canonical.load(root, task)
    assert source == "imagenet"
    fresh = canonical.init_weights(task)
    for key, array in loaded.items():  # ImageNet numbers everywhere but the new head, which is the seeded init
        np.testing.assert_array_equal(array, fresh[key] if key in canonical.HEADS.get(task, ()) else stored[key])

    assert weights.main(["--root", str(root), "--tasks", task]) == 0  # already there: nothing downloaded again
    assert len(server.requests) == 1


@pytest.mark.framework
def test_corrupt_download_is_deleted_and_reported(published, server, tmp_path, monkeypatch, capsys):
    files, _ = published
    name = publish(server, tmp_path, monkeypatch, "resnet50", files["resnet50", "zip"], prefix="00000000")
    root = tmp_path / "data"
    with pytest.raises(DataError, match=f"{name}.*SHA-256 starts .*00000000.*deleted it.*shared.weights --root"):
        weights.prepare(root, ["resnet50"])
    assert not list((root / "weights").rglob("*.pth*"))
    assert not canonical.weights_path(root, "resnet50").exists()
    assert canonical.load(root, "resnet50")[1] == "random"
    assert weights.main(["--root", str(root), "--tasks", "resnet50"]) == 2  # the CLI: one line, no traceback
    assert capsys.readouterr().err.startswith("error: ")


@pytest.mark.framework
def test_the_full_hash_of_the_first_download_is_pinned_and_the_npz_checked_on_load(
    published, server, tmp_path, monkeypatch
):
    """torchvision publishes 32 bits of each file's SHA-256: a later download of the same URL must be the file first
    downloaded (all 256 bits), and the converted npz is the one the manifest recorded, on every load."""
    files, _ = published
    name = publish(server, tmp_path, monkeypatch, "resnet50", files["resnet50", "zip"])
    root = tmp_path / "data"
    weights.prepare(root, ["resnet50"])
    manifest_file = root / "weights" / "manifest.json"
    manifest = json.loads(manifest_file.read_text())
    entry = manifest["tasks"]["resnet50"]
    assert len(entry["sha256"]) == 64 and len(entry["npz_sha256"]) == 64
    assert canonical.load(root, "resnet50")[1] == "imagenet"

    npz = canonical.weights_path(root, "resnet50")  # changed after conversion: refused on load
    stored = dict(np.load(npz))
    first = sorted(stored)[0]
    stored[first] = stored[first] + 1
    np.savez(npz, **stored)
    with pytest.raises(ValueError, match="not the .* its manifest recorded.*shared.weights --root"):
        canonical.load(root, "resnet50")

    npz.unlink()  # a new download whose prefix matches but whose full hash does not
    entry["sha256"] = entry["sha256"][:8] + "0" * 56
    manifest_file.write_text(json.dumps(manifest))
    with pytest.raises(DataError, match=f"{name}: SHA-256 .* when first downloaded .*delete the resnet50 entry"):
        weights.prepare(root, ["resnet50"])
    assert not npz.exists()


@pytest.mark.unit
def test_unreachable_server_says_how_to_work_offline(tmp_path, monkeypatch):
    monkeypatch.setitem(weights.SOURCES, "resnet50", "http://127.0.0.1:9/resnet50-11ad3fa6.pth")
    with pytest.raises(DataError, match="cannot download .*--from resnet50-11ad3fa6.pth"):
        weights.prepare(tmp_path, ["resnet50"])


@pytest.mark.framework
@pytest.mark.parametrize("fmt", ["legacy", "tar"])
def test_from_a_copied_file(published, tmp_path, monkeypatch, fmt):
    """Air-gapped hosts: a published file copied by hand is checked and converted; a wrong one is kept, reported."""
    files, expected = published
    data = files["densenet121", fmt].read_bytes()
    monkeypatch.setitem(canonical.SHAPES, "densenet121", TINY["densenet121"])
    monkeypatch.setitem(
        weights.SOURCES, "densenet121", f"http://nowhere.invalid/densenet121-{hashlib.sha256(data).hexdigest()[:8]}.pth"
    )
    copy = tmp_path / "densenet121-copied.pth"
    copy.write_bytes(data)
    assert weights.main(["--root", str(tmp_path / "data"), "--from", str(copy)]) == 0  # no download tried
    loaded, source = canonical.load(tmp_path / "data", "densenet121")
    assert source == "imagenet"
    np.testing.assert_array_equal(
        loaded["features.denseblock1.denselayer1.conv2.weight"],
        expected["densenet121"]["features.denseblock1.denselayer1.conv.2.weight"],
    )
    copy.write_bytes(data[:-10])
    with pytest.raises(DataError, match="SHA-256"):
        weights.prepare(tmp_path / "data", [], [copy])
    assert copy.exists()
    assert weights.main(["--root", str(tmp_path / "data"), "--from", str(tmp_path / "densenet121-gone.pth")]) == 2


@pytest.mark.unit
def test_conversion_checks_every_name_and_shape():
    shapes = TINY["resnet50"]
    state = {name: np.zeros(shape, np.float32) for name, shape in shapes.items()}
    assert weights.to_canonical({**state, "fc.weight": np.zeros((1000, 8))}, "resnet50", shapes).keys() == state.keys()
    with pytest.raises(DataError, match="conv1.weight has shape"):
        weights.to_canonical({**state, "conv1.weight": np.zeros((4, 3, 7, 7))}, "resnet50", shapes)
    with pytest.raises(DataError, match="lacks 1"):
        weights.to_canonical({k: v for k, v in state.items() if k != "bn1.bias"}, "resnet50", shapes)
    with pytest.raises(DataError, match="layer9.0.conv1.weight"):
        weights.to_canonical({**state, "layer9.0.conv1.weight": np.zeros(1)}, "resnet50", shapes)


@pytest.mark.unit
def test_densenet_old_keys_as_torchvision_renames_them():
    assert (
        canonical_name("features.denseblock3.denselayer12.norm.2.running_var")
        == "features.denseblock3.denselayer12.norm2.running_var"
    )
    assert canonical_name("features.transition1.norm.weight") == "features.transition1.norm.weight"


@pytest.mark.unit
def test_a_file_that_would_run_code_is_refused(tmp_path):
    path = tmp_path / "evil.pth"
    path.write_bytes(pickle.dumps(print))  # any global outside a state dict's few
    with pytest.raises(DataError, match="unexpected global builtins.print"):
        weights.read_pth(path)


@pytest.mark.unit
def test_published_names_carry_their_hash_prefix():
    assert weights.hash_prefix(weights.SOURCES["resnet50"]) == "11ad3fa6"
    assert weights.hash_prefix(weights.SOURCES["densenet121"]) == "a639ec97"
    assert weights.task_of("/mnt/usb/densenet121-a639ec97.pth") == "densenet121"
