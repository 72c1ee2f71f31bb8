"""The clock's barriers of the legacy runners fetch an output of the step's last operation (issue 22): Caffe2's reads
the blob the training net's last operator writes, CNTK's a scalar computed from the parameter its learner updates
last. Each test trains one real step of the runner's cnn on the CPU and checks that the barrier returns the value the
step just wrote: a barrier that returns nothing, or reads a value the step does not change, fails."""

import json
import subprocess

import numpy as np
import pytest
from conftest import ROOT, framework_python

pytestmark = pytest.mark.framework

# Both probes train the runner's cnn two steps on a random batch of 4 and print what the barrier returned before the
# first step and after each step, beside the same value read directly.
CAFFE2_PROBE = """
import json, sys
sys.path.insert(0, {root!r})
import numpy as np
from caffe2.python import workspace
from runners.caffe2 import CPU, cnn, sync
train = cnn.build_model(device=CPU, is_test=False)
loss = cnn.add_training_operators(train, CPU, lr=0.1, momentum=0.9, placement="host")
workspace.RunNetOnce(train.param_init_net)
step = cnn.make_train_step(train, CPU, ["data", "label"], loss)
barrier, last = sync(train.net), train.net.Proto().op[-1]
rng = np.random.RandomState(0)
batch = {{"data": rng.rand(4, 3, 32, 32).astype(np.float32), "label": np.arange(4, dtype=np.int32)}}
out = {{"last_op": last.type, "blob": last.output[-1], "barrier": [barrier().tolist()], "direct": []}}
for _ in range(2):
    step(batch)
    out["barrier"].append(barrier().tolist())
    out["direct"].append(workspace.FetchBlob(last.output[-1]).tolist())
print(json.dumps(out))
"""

CNTK_PROBE = """
import json, sys
sys.path.insert(0, {root!r})
import numpy as np
import cntk as C
from runners.cntk import cnn, sync
from shared import params
model = cnn.build_model()
labels = C.input_variable(10, np.float32)
learner = cnn.make_learner(model.parameters, dict(params.CNN, lr=0.1))
trainer = C.Trainer(model, C.cross_entropy_with_softmax(model, labels), [learner])
barrier, last = sync(trainer), learner.parameters[-1]
rng = np.random.RandomState(0)
batch = {{model.arguments[0]: rng.rand(4, 3, 32, 32).astype(np.float32), labels: np.eye(10, dtype=np.float32)[:4]}}
out = {{"last": list(last.shape), "barrier": [barrier()], "direct": []}}
for _ in range(2):
    trainer.train_minibatch(batch)
    out["barrier"].append(barrier())
    out["direct"].append(float(last.value.sum(dtype=np.float64)))
print(json.dumps(out))
"""


def probe(framework, code):
    out = subprocess.run(
        [str(framework_python(framework)), "-c", code.format(root=str(ROOT))],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert out.returncode == 0, out.stderr[-3000:]
    return json.loads(out.stdout.strip().splitlines()[-1])


def assert_tracks_each_step(barrier, direct):
    """The barrier's value after each step is the value that step wrote, and each step changed it."""
    assert all(value is not None for value in barrier), barrier
    before, after = barrier[0], barrier[1:]
    np.testing.assert_allclose(after, direct, rtol=1e-5, atol=1e-6)
    assert not np.allclose(before, after[0]) and not np.allclose(after[0], after[1]), barrier


def test_caffe2_barrier_fetches_the_last_operators_output():
    out = probe("caffe2", CAFFE2_PROBE)
    # The training net ends with the momentum update of fc2's bias; the barrier returns that updated bias.
    assert (out["last_op"], out["blob"]) == ("MomentumSGDUpdate", "fc2_b"), out
    assert_tracks_each_step(out["barrier"], out["direct"])


def test_cntk_barrier_reads_the_parameter_updated_last():
    out = probe("cntk", CNTK_PROBE)
    assert_tracks_each_step(out["barrier"], out["direct"])


# Lightning's clock lives in a Callback (runners.lightning.EpochTimer) inside `trainer.fit`: this probe swaps the
# barrier `sync` hands the timer for one that records, at each call, the optimizer steps taken so far and fc1's bias,
# trains the cnn two epochs of six steps in windows of two, and reads what torch.cuda.synchronize would have been
# called with for a GPU device.
LIGHTNING_PROBE = """
import json, sys, types
sys.path.insert(0, {root!r})
import torch
import runners.lightning as RL
from runners.lightning import EpochTimer, Weights, train_loader, trainer
from runners.lightning import cnn
torch.manual_seed(0)
model, events = cnn.build_model(dropout=False), []
cuda_sync, synced = RL.sync, []
torch.cuda.synchronize = lambda device=None: synced.append(str(device))
cuda_sync(torch.device("cuda", 0))()
def recording(device):
    return lambda: events.append([fit.global_step, float(model.net.fc1.bias.detach().double().sum()), device.type])
RL.sync = recording
weights = Weights(lambda net: float(net.fc1.bias.detach().double().sum()))
fit = trainer(types.SimpleNamespace(device="cpu", gpus=1), "32-true", [weights, EpochTimer(window=2)], max_epochs=2)
x, y = torch.rand(24, 3, 32, 32), torch.randint(0, 10, (24,))
fit.fit(model, train_loader(x, y, 4))
print(json.dumps({{"events": events, "after": weights.after, "synced": synced}}))
"""


def test_lightning_timer_closes_each_window_on_the_barrier_after_its_steps():
    out = probe("lightning", LIGHTNING_PROBE)
    assert out["synced"] == ["cuda:0"], out  # on a GPU the barrier is torch.cuda.synchronize of the cell's device
    steps = [step for step, _, _ in out["events"]]
    # Each epoch: its start, the first step apart (warm-up), every window of two, its end: once each, no more.
    assert steps == [0, 1, 3, 5, 6, 6, 8, 10, 12, 12], steps
    assert {device for _, _, device in out["events"]} == {"cpu"}, out
    # At each barrier after a step the model holds that step's update: the barrier follows the optimizer step.
    for step, bias, _ in out["events"]:
        if step:
            assert bias == pytest.approx(out["after"][step - 1], rel=1e-12), (step, bias, out["after"])
    assert len(set(out["after"])) == len(out["after"]), out["after"]  # and every step changed it
