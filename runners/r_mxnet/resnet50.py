"""r-mxnet · resnet50: launches runners/r_mxnet/resnet50.R (R through reticulate to MXNet Gluon; the code to read)
with Rscript."""

from runners import rscript

main, build_model, load_canonical, predict_logits, _ = rscript.task(__file__)
