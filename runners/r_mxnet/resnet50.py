"""r-mxnet · resnet50: launches runners/r_mxnet/resnet50.R (R through reticulate to MXNet Gluon; the code to read) with Rscript."""
from pathlib import Path

from runners import rscript

SCRIPT = Path(__file__).with_suffix(".R")


def main(cfg):
    return rscript.run_script(SCRIPT, cfg)


def build_model(cfg=None):
    """The equivalence interface (tests/fw_probe.py); the model is built in R when predict_logits runs."""
    return rscript.RModel(SCRIPT)


def load_canonical(model, weights):
    model.load_canonical(weights)


def predict_logits(model, x):
    return model.predict_logits(x)
