"""matrix.yaml validation and expansion: every bad input is one clear MatrixError naming the culprit."""

import copy
import re

import pytest
import yaml
from conftest import ROOT

from scripts.plan.matrix import MatrixError, expand, load, parse

pytestmark = pytest.mark.unit


@pytest.fixture
def doc():
    return yaml.safe_load((ROOT / "matrix.yaml").read_text())


def error_of(doc):
    with pytest.raises(MatrixError) as e:
        parse(doc)
    return str(e.value)


def test_the_shipped_matrix_is_valid_and_every_profile_expands():
    matrix = load()
    for name in matrix.profiles:
        assert expand(matrix, name).cells


def test_demo_profile_is_small_fp32_with_one_multi_device_densenet_per_system():
    matrix = load()
    plan = expand(matrix, "demo")
    assert plan.executor == "local"
    assert {c.device for c in plan.cells} == {"cpu"} and {c.data for c in plan.cells} == {"synthetic"}
    assert {c.precision for c in plan.cells} == {"fp32"}
    assert {c.framework for c in plan.cells} == set(matrix.frameworks)  # every system
    moved = {(r["framework"], r["task"]) for r in matrix.profiles["demo"]["exclude"]}
    assert moved == {("keras2-theano", "gru")}  # the one cell moved to demo-full, for its cold Theano compile
    for fid, fw in matrix.frameworks.items():
        mine = [c for c in plan.cells if c.framework == fid]
        assert sorted(c.task for c in mine) == sorted(t for t in fw.tasks if (fid, t) not in moved)
        if "densenet121" in fw.tasks:
            assert [c.gpus for c in mine if c.task == "densenet121"] == [2]  # data-parallel over two CPU devices
    assert len(plan.cells) == sum(len(fw.tasks) for fw in matrix.frameworks.values()) - len(moved)


def test_demo_full_adds_the_bf16_column_and_the_moved_cells_to_the_demo():
    matrix = load()
    demo, full = expand(matrix, "demo").cells, expand(matrix, "demo-full").cells
    assert set(demo) < set(full) and {c.precision for c in full} == {"fp32", "bf16"}
    assert {(c.framework, c.task) for c in full if c.precision == "fp32" and c not in demo} == {
        ("keras2-theano", "gru")
    }
    bf16 = {fid for fid, fw in matrix.frameworks.items() if "bf16" in fw.precisions}
    assert {(c.framework, c.task, c.gpus) for c in full if c.precision == "bf16"} == {
        (c.framework, c.task, c.gpus) for c in demo if c.framework in bf16
    }


def test_full_profile_covers_every_framework_on_gpus():
    matrix = load()
    plan = expand(matrix, "full")
    with_gpu_images = {
        fid for fid, fw in matrix.frameworks.items() if any(v.device == "gpu" for v in fw.variants.values())
    }
    assert {c.framework for c in plan.cells} == with_gpu_images  # the seed's cross-framework tables
    # Julia: no image with Knet built yet (its registry is unreachable here), so nothing could check what a GPU
    # variant would carry; R: CPU images only so far
    assert set(matrix.frameworks) - with_gpu_images == {"julia-knet", "r-keras", "r-mxnet"}
    assert {c.device for c in plan.cells} == {"gpu"} and {c.data for c in plan.cells} == {"real"}
    assert {c.variant for c in plan.cells if c.framework == "pytorch"} == {"cu130", "cu130-cudnn928", "cu128"}
    assert {c.variant for c in plan.cells if c.framework == "mxnet-gluon"} == {"cu112", "cu117"}
    assert {c.variant for c in plan.cells if c.framework in ("keras2-theano", "lasagne")} == {"cu118"}
    assert {c.gpus for c in plan.cells if c.task == "densenet121"} == {1, 2, 4, 8}


def test_a_merged_profile_is_validated_like_any_other(tmp_path):
    text = (ROOT / "matrix.yaml").read_text().replace("    <<: *demo\n", "    <<: *demo\n    precison: [fp32]\n", 1)
    path = tmp_path / "matrix.yaml"
    path.write_text(text)
    with pytest.raises(MatrixError, match="profiles.reference: unknown key 'precison'"):
        load(path)


def test_malformed_yaml_names_the_file(tmp_path):
    bad = tmp_path / "matrix.yaml"
    bad.write_text("frameworks: [pytorch\nprofiles: {}\n")
    with pytest.raises(MatrixError, match=r"matrix.yaml is not valid YAML"):
        load(bad)


def test_unknown_top_level_key(doc):
    doc["profile"] = {}
    assert re.search(r"matrix.yaml: unknown key 'profile'", error_of(doc))


def test_unknown_key_in_a_profile(doc):
    doc["profiles"]["demo"]["precision"] = ["fp32"]
    assert "profiles.demo: unknown key 'precision'" in error_of(doc)


@pytest.mark.parametrize(
    "axis, value, message",
    [
        ("frameworks", ["pytorch", "tensorflw"], "profiles.demo.frameworks: unknown value 'tensorflw'"),
        ("tasks", ["cnn", "lstm"], "profiles.demo.tasks: unknown value 'lstm'"),
        ("precisions", ["fp32", "fp8"], "profiles.demo.precisions: unknown value 'fp8'"),
        ("variants", ["cu999"], "profiles.demo.variants: unknown value 'cu999'"),
        ("gpus", [0], "profiles.demo.gpus: expected a positive number"),
        ("executor", "slurm", "profiles.demo.executor: unknown value 'slurm'"),
        ("tunings", ["default", "fast"], "profiles.demo.tunings: unknown value 'fast'"),
    ],
)
def test_unknown_values_are_named(doc, axis, value, message):
    doc["profiles"]["demo"][axis] = value
    assert message in error_of(doc)


def test_unknown_precision_in_a_framework(doc):
    doc["frameworks"]["pytorch"]["precisions"] = ["fp32", "int4"]
    assert "frameworks.pytorch.precisions: unknown value 'int4'" in error_of(doc)


def test_missing_requirements_file(doc):
    doc["frameworks"]["pytorch"]["variants"]["cpu"]["requirements"] = "docker/pytorch/nope.txt"
    assert "frameworks.pytorch.variants.cpu.requirements: docker/pytorch/nope.txt does not exist" in error_of(doc)


def test_a_variant_may_name_its_dockerfile_which_must_exist(doc):
    theano = doc["frameworks"]["keras2-theano"]["variants"]
    assert parse(doc).frameworks["keras2-theano"].variants["cu118"].dockerfile == "docker/theano/gpu.Dockerfile"
    assert parse(doc).frameworks["keras2-theano"].variants["cpu"].dockerfile is None
    theano["cu118"]["dockerfile"] = "docker/theano/nope.Dockerfile"
    assert (
        "frameworks.keras2-theano.variants.cu118.dockerfile: docker/theano/nope.Dockerfile does not exist"
        in error_of(doc)
    )


def test_a_child_variant_cannot_name_a_dockerfile(doc):
    """A variant with a parent is always built by docker/overrides.Dockerfile: a `dockerfile` there would be ignored."""
    doc["frameworks"]["pytorch"]["variants"]["cu130-cudnn928"]["dockerfile"] = "docker/Dockerfile"
    assert "frameworks.pytorch.variants.cu130-cudnn928.dockerfile: a variant with a parent" in error_of(doc)


def test_repeated_axis_value_is_a_duplicate_cell(doc):
    doc["profiles"]["demo"]["precisions"] = ["fp32", "bf16", "fp32"]
    assert "profiles.demo.precisions: 'fp32' is listed twice" in error_of(doc)


def test_duplicate_yaml_key_is_an_error(tmp_path):
    text = (ROOT / "matrix.yaml").read_text().replace("profiles:\n", "profiles:\n  smoke:\n    executor: local\n", 1)
    path = tmp_path / "matrix.yaml"
    path.write_text(text)
    with pytest.raises(MatrixError, match=r"duplicate key 'smoke' at line \d+"):
        load(path)


def test_empty_expansion_is_an_error(doc):
    doc["profiles"]["demo"]["device"] = "gpu"  # the demo's only variant is a CPU image
    with pytest.raises(MatrixError, match="profiles.demo: expands to no cell"):
        expand(parse(doc), "demo")


def test_unknown_profile(doc):
    with pytest.raises(MatrixError, match="unknown profile 'nope'; defined: demo"):
        expand(parse(doc), "nope")


def test_expansion_is_stable_unique_and_respects_exclusions(doc):
    doc["profiles"]["full"]["frameworks"] = ["pytorch"]
    doc["profiles"]["full"]["variants"] = ["cu130", "cu128"]  # `cuda` names no PyTorch image: an error otherwise
    plan = expand(parse(doc), "full")
    ids = [c.id for c in plan.cells]
    assert ids == [c.id for c in expand(parse(copy.deepcopy(doc)), "full").cells]  # same order every time
    assert len(ids) == len(set(ids))
    assert ids[0] == "pytorch-cnn-cu130-fp32-1gpu"
    assert not any(c.task == "gru" and c.precision == "tf32" for c in plan.cells)  # the exclude rule
    assert {c.gpus for c in plan.cells if c.task == "cnn"} == {1}  # single-device tasks are not multiplied
    assert {c.gpus for c in plan.cells if c.task == "densenet121"} == {1, 2, 4, 8}


def test_exclude_rule_needs_a_key_and_a_reason(doc):
    doc["exclude"] = [{"reason": "nothing named"}]
    assert "exclude[0]: name at least one of" in error_of(doc)
    doc["exclude"] = [{"task": "gru"}]
    assert "exclude[0]: missing key 'reason'" in error_of(doc)


def test_a_profile_excludes_cells_of_its_own(doc):
    """A profile's `exclude` drops cells from that profile only; its rules are checked like the top-level ones."""
    doc["profiles"]["smoke"]["exclude"] = [{"task": "gru", "reason": "not in this profile"}]
    matrix = parse(doc)
    assert "gru" not in {c.task for c in expand(matrix, "smoke").cells}
    assert "gru" in {c.task for c in expand(matrix, "demo").cells}
    doc["profiles"]["smoke"]["exclude"] = [{"task": "gru"}]
    assert "profiles.smoke.exclude[0]: missing key 'reason'" in error_of(doc)


def test_matrix_cli_prints_the_error_once_and_exits_2(tmp_path, capsys):
    from scripts.plan.matrix import main

    bad = tmp_path / "m.yaml"
    bad.write_text("schema: 1\nframeworks: {}\nprofiles: {demo: {executor: local}}\nbogus: 1\n")
    assert main(["--matrix", str(bad)]) == 2
    assert capsys.readouterr().err.count("error:") == 1


def test_a_tuned_cell_is_its_own_cell_beside_the_default_one_whose_id_is_unchanged(doc):
    """The tuning axis (default, tuned): a default cell keeps the id it had before the axis existed, so every
    committed reference stays comparable; a tuned cell's id says so."""
    before = [c.id for c in expand(parse(copy.deepcopy(doc)), "demo").cells]
    doc["profiles"]["demo"]["tunings"] = ["default", "tuned"]
    cells = expand(parse(doc), "demo").cells
    assert [c.id for c in cells if c.tuning == "default"] == before
    tuned = [c for c in cells if c.tuning == "tuned"]
    assert len(tuned) == len(before) and all(c.id.endswith("-tuned") for c in tuned)
    assert "pytorch-cnn-cpu-fp32-1cpu-tuned" in {c.id for c in tuned}
    doc["profiles"]["demo"]["exclude"] = [{"tuning": "tuned", "framework": "lasagne", "reason": "none written"}]
    assert not any(c.framework == "lasagne" and c.tuning == "tuned" for c in expand(parse(doc), "demo").cells)


def test_make_venvs_builds_every_family_matrix_yaml_declares():
    """A new family is built by `make venvs` (and so tested in CI) without a list to edit: no ids means one of each."""
    from scripts.launch.venvs import one_per_family

    matrix = load()
    chosen = one_per_family(matrix)
    assert sorted(fw.family for fw in chosen) == sorted({fw.family for fw in matrix.frameworks.values()})
    assert [fw.id for fw in chosen][:2] == ["pytorch", "tensorflow"]  # matrix.yaml's order: the same as before
