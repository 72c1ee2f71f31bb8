"""Runners: `python -m runners FRAMEWORK TASK …`, one package per framework family, one module per task.

A runner imports only its framework, numpy and `shared`. The host side reaches it through the command line and the
result file alone.
"""

import os

__version__ = "0.1.0"

# Framework id -> (runner package, environment it needs before the framework is imported).
# Ids name the API as well as the library (docs/design.md): the three Keras ids share one package and pick the backend.
FRAMEWORKS = {
    "pytorch": ("pytorch", {}),
    "lightning": ("lightning", {}),  # PyTorch Lightning's LightningModule + Trainer, in the pytorch family's install
    "tensorflow": ("tensorflow", {}),
    "keras-tf": ("keras", {"KERAS_BACKEND": "tensorflow"}),
    "keras-jax": ("keras", {"KERAS_BACKEND": "jax"}),
    "keras-torch": ("keras", {"KERAS_BACKEND": "torch"}),
    "jax": ("jax", {}),
    "paddle": ("paddle", {}),  # PaddlePaddle 3.x dygraph (paddle.nn.Layer), to_static as its tuned path
    "mxnet-gluon": ("mxnet_gluon", {}),  # one MXNet install, two APIs: imperative-then-hybridized Gluon …
    "mxnet-module": ("mxnet_module", {}),  # … and the symbolic graph + Module of the seed's era
    "chainer": ("chainer", {}),
    "cntk": ("cntk", {}),  # CNTK 2.7's own Python API (Python 3.6)
    "keras2-cntk": ("keras2", {"KERAS_BACKEND": "cntk"}),  # Keras 2.3 (multi-backend Keras' last release) …
    "keras2-theano": ("keras2", {"KERAS_BACKEND": "theano"}),  # … on CNTK and on Theano 1.0
    "lasagne": ("lasagne", {}),  # Lasagne 0.1 layers over Theano expressions
    "caffe2": ("caffe2", {}),  # Caffe2's brew + workspace, from torch 1.8.1's wheel
    "r-keras": ("r_keras", {"KERAS_BACKEND": "tensorflow"}),  # R scripts driving Keras 3 through reticulate …
    "r-mxnet": ("r_mxnet", {}),  # … and MXNet Gluon
    "julia-knet": ("julia_knet", {}),  # Julia scripts with Knet
}


def prepare_environment(framework):
    """Set what must be set before the framework is imported (e.g. KERAS_BACKEND); returns the package name."""
    package, env = FRAMEWORKS[framework]
    os.environ.update(env)
    return package
