"""r-keras: R scripts driving Keras 3 (TensorFlow backend) through reticulate (R 4.2, reticulate 1.28, keras 3.15).

They call Keras' Python API from R with raw reticulate calls (`keras$layers$GRU(...)`), not the R `keras3` package's
verbs (`layer_gru()`), which is not installable here (no CRAN): R's idioms where R has them, Python's API throughout.

The code to read is R: runners/r_keras/{cnn,gru,resnet50}.R, the twins of runners/keras/*.py. This package is only
what the Python contract needs: one small launcher module per task (runners/rscript.py runs the script with
`Rscript` in this environment) and the system block's provenance, R's versions beside Keras'.
"""

from runners import rscript

count_parameters = rscript.count_parameters


def framework_info():
    """Keras' own report (runners.keras: backend version, CUDA, cuDNN, GPUs; imported here, in the interpreter R
    drives) with R's and reticulate's versions in front."""
    from runners import keras as py_keras

    info = py_keras.framework_info()
    r = rscript.r_info(f"keras {info['keras_version']} ({info['backend']} {info['backend_version']})")
    return {**info, **r}


def gemm(cfg, n, dtype):
    """The calibration GEMM: the Keras (TensorFlow backend) the R scripts drive, from this launcher's Python."""
    from runners import keras as py_keras

    return py_keras.gemm(cfg, n, dtype)
