"""Runners: `python -m runners FRAMEWORK TASK …`, one package per framework family, one module per task.

A runner imports only its framework, numpy and `shared`. The host side reaches it through the command line and the
result file alone.
"""
import os

__version__ = "0.1.0"

# Framework id -> (runner package, environment it needs before the framework is imported).
# Ids name the API as well as the library (DESIGN.md): the three Keras ids share one package and pick the backend.
FRAMEWORKS = {
    "pytorch": ("pytorch", {}),
    "tensorflow": ("tensorflow", {}),
    "keras-tf": ("keras", {"KERAS_BACKEND": "tensorflow"}),
    "keras-jax": ("keras", {"KERAS_BACKEND": "jax"}),
    "keras-torch": ("keras", {"KERAS_BACKEND": "torch"}),
    "jax": ("jax", {}),
    "mxnet-gluon": ("mxnet_gluon", {}),     # one MXNet install, two APIs: imperative-then-hybridized Gluon …
    "mxnet-module": ("mxnet_module", {}),   # … and the symbolic graph + Module of the seed's era
    "chainer": ("chainer", {}),
}


def prepare_environment(framework):
    """Set what must be set before the framework is imported (e.g. KERAS_BACKEND); returns the package name."""
    package, env = FRAMEWORKS[framework]
    os.environ.update(env)
    return package
