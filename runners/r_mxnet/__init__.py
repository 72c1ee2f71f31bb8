"""r-mxnet: R scripts driving MXNet 1.9 Gluon through reticulate (R 4.2, reticulate 1.28, mxnet 1.9.1).

The code to read is R: runners/r_mxnet/{gru,resnet50}.R, the twins of runners/mxnet_gluon/*.py. This package is only
what the Python contract needs: one small launcher module per task (runners/rscript.py runs the script with
`Rscript` in this environment) and the system block's provenance, R's versions beside MXNet's.
"""

from runners import rscript

count_parameters = rscript.count_parameters


def framework_info():
    """MXNet's own report (runners.mxnet_gluon: version, CUDA build, GPUs) with R's and reticulate's in front."""
    from runners import mxnet_gluon

    info = mxnet_gluon.framework_info()
    return {**info, **rscript.r_info(f"mxnet {info['framework_version']}")}


def gemm(cfg, n, dtype):
    """The calibration GEMM: the MXNet the R scripts drive, from this launcher's Python."""
    from runners import mxnet_gluon

    return mxnet_gluon.gemm(cfg, n, dtype)
