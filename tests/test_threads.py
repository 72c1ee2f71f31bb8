"""One thread-count rule for every framework (shared/threads.py): intra-op = the usable CPUs, inter-op = 1, set as the
variables every library reads at start, never over a user's own setting, and recorded with the CPU affinity."""

import pytest

from shared import sysinfo, threads

pytestmark = pytest.mark.unit


@pytest.mark.parametrize("usable, intra", [(2, 2), (1.5, 1), (0.5, 1), (16, 16)])
def test_intra_op_is_the_usable_cpus_rounded_down_and_inter_op_one(usable, intra):
    assert threads.rule(usable) == {"intra_op": intra, "inter_op": 1}


@pytest.mark.parametrize("intra, devices, each", [(2, 2, 1), (16, 2, 8), (2, 4, 1), (3, 2, 1)])
def test_devices_on_one_cpu_share_its_threads(intra, devices, each):
    assert threads.per_device(intra, devices) == each


def test_apply_sets_every_variable_and_keeps_the_users(monkeypatch):
    monkeypatch.setattr(sysinfo, "usable_cpus", lambda: 2)
    monkeypatch.setattr(threads, "_applied", {})  # this process's own block stays as it was
    env = {"MKL_NUM_THREADS": "7"}
    block = threads.apply(env)
    assert env == {
        "OMP_NUM_THREADS": "2",
        "MKL_NUM_THREADS": "7",
        "OPENBLAS_NUM_THREADS": "2",
        "TF_NUM_INTRAOP_THREADS": "2",
        "TF_NUM_INTEROP_THREADS": "1",
    }
    assert block["set_by"]["MKL_NUM_THREADS"] == "user" and block["set_by"]["OMP_NUM_THREADS"] == "rule"
    assert block["env"] == env and block["usable_cpus"] == 2 and block["affinity"] == threads.affinity()
    assert threads.applied() == block
