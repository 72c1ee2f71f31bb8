"""MXNet Module runners (mxnet 1.9.1, the symbolic API of the seed's era): what the Module API needs beyond the Gluon
package, whose contexts, barrier and provenance it shares (one MXNet install, two APIs).

The Module idiom in a sentence: declare the whole network as an `mx.sym` graph (nothing runs yet), wrap it in an
`mx.mod.Module`, then `bind` it to input shapes and contexts (MXNet plans memory and picks kernels for the whole graph
once), `init_params`, `init_optimizer`, and loop `forward_backward` + `update` over `mx.io.DataBatch`es. What a Gluon
user should know when reading these runners:
- the loss is part of the graph: `SoftmaxOutput` outputs probabilities in forward and the cross-entropy gradient in
  backward, so there is no loss value unless a metric computes one (and a metric on every step would wait, lesson 14);
- parameters live in the Module, not in layer objects: they are named `<layer>_weight`, `<layer>_bias`, BatchNorm's
  `_gamma`/`_beta` and its running statistics are *auxiliary states* (`_moving_mean`/`_moving_var`), not arguments;
- the Module divides gradients by the batch size for you (`rescale_grad`), where Gluon's `trainer.step(N)` asks;
- `forward(batch, is_train=False)` is inference mode (dropout off, BatchNorm on its moving statistics), the role
  Gluon gives to "outside `autograd.record()`".
"""

import mxnet as mx
import numpy as np

from runners.mxnet_gluon import contexts, framework_info, gemm, sync, train_batches  # noqa: F401 (as Gluon's)
from shared.record import Skip

# MXNet's BatchNorm names its four arrays differently from torchvision; conv and dense layers keep `weight`/`bias`
# and the canonical layouts (conv OIHW, dense (out, in)): MXNet is channels-first like PyTorch.
BATCHNORM_NAMES = {"weight": "gamma", "bias": "beta", "running_mean": "moving_mean", "running_var": "moving_var"}
AUX_STATES = ("moving_mean", "moving_var")  # updated by forward passes, never by the optimizer

# MXNet's Adam (mx.optimizer.Adam) folds the bias correction into the learning rate, lr·√(1−β₂ᵗ)/(1−β₁ᵗ), and adds ε
# to √v before it, like Keras: the same ε is ε/√(1−β₂ᵗ) in PyTorch's and optax's terms (larger in the first steps).
ADAM_EPSILON_HAT = "Adam ε added before bias correction (MXNet's, like Keras' epsilon-hat form; PyTorch/optax: after)"


# rosetta: precision
def check_precision(precision):
    """The Module runners train and infer in float32 only: mixed precision for a symbol means rewriting the graph by
    hand (`mxnet.contrib.amp.convert_symbol` plus a loss-scaled optimizer), which its users rarely did."""
    if precision != "fp32":
        raise Skip(
            f"mxnet-module runs fp32 only; MXNet's {precision} path is Gluon's (mxnet-gluon), the symbolic "
            "API would need its graph rewritten by hand (amp.convert_symbol)"
        )


def count_parameters(model):
    """Trainable parameters of a bound Module: its arguments (weights, biases, γ, β) but not its auxiliary states
    (BatchNorm's moving mean and variance); none is fixed (`fixed_param_names`) in these runners."""
    arg_params, _ = model.get_params()
    return sum(int(np.prod(a.shape)) for a in arg_params.values())


def mxnet_name(name, batchnorms=()):
    """A canonical (torchvision-style) name -> the Module's: the layer path joined by `_` (symbol names are flat), then
    the leaf, renamed for BatchNorms (`batchnorms`: their canonical prefixes): `layer1.0.bn1.weight` ->
    `layer1_0_bn1_gamma`, `layer1.0.conv1.weight` -> `layer1_0_conv1_weight`."""
    prefix, leaf = name.rsplit(".", 1)
    return f"{prefix.replace('.', '_')}_{BATCHNORM_NAMES[leaf] if prefix in batchnorms else leaf}"


def set_canonical(model, weights, batchnorms=()):
    """Load canonical weights into a bound Module strictly: every argument and auxiliary state set, no name left over
    (set_params with allow_missing and allow_extra off checks both, and the shapes)."""
    arrays = {mxnet_name(name, batchnorms): mx.nd.array(np.asarray(w, np.float32)) for name, w in weights.items()}
    arg_params = {name: a for name, a in arrays.items() if not name.endswith(AUX_STATES)}
    aux_params = {name: a for name, a in arrays.items() if name.endswith(AUX_STATES)}
    model.set_params(arg_params, aux_params, allow_missing=False, allow_extra=False)


def predict(symbol, model, x):
    """Run `symbol` (the model's graph or an internal output of it, e.g. the logits under SoftmaxOutput) on the NumPy
    batch `x` with the model's current parameters, in inference mode, on the CPU; returns NumPy. A fresh Module bound
    for inference (`for_training=False`: no gradient buffers) at x's shape, as Module users extracted features."""
    probe = mx.mod.Module(symbol, data_names=("data",), label_names=None, context=mx.cpu())
    probe.bind(data_shapes=[("data", x.shape)], for_training=False)
    arg_params, aux_params = model.get_params()
    probe.set_params(arg_params, aux_params, allow_missing=False, allow_extra=False)
    probe.forward(mx.io.DataBatch(data=[mx.nd.array(x)]), is_train=False)
    return probe.get_outputs()[0].asnumpy()


def data_batches(x_train, y_train, batch_size, epoch):
    """One epoch of `mx.io.DataBatch`es in the shared order (Gluon's `train_batches` gathers them where the training set
    lives); `Module.forward` copies each into the executor's input arrays on its context, inside the clock."""
    for x, y in train_batches(x_train, y_train, batch_size, epoch):
        yield mx.io.DataBatch(data=[x], label=[y])


def cross_entropy(model, batch):
    """The mean cross-entropy of `batch` from the Module's current outputs (SoftmaxOutput's probabilities), as
    mx.metric.CrossEntropy computes it (−log(p + 1e-12)), but as an NDArray queued on the engine: a metric would read
    the outputs back to the host on every step and stall the engine (lesson 14). The Module loop has no loss value of
    its own to return."""
    probabilities = model.get_outputs()[0]
    return -mx.nd.log(mx.nd.pick(probabilities, batch.label[0].as_in_context(probabilities.context)) + 1e-12).mean()
