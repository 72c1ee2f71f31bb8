"""r-mxnet · gru: launches runners/r_mxnet/gru.R (R through reticulate to MXNet Gluon; the code to read) with
Rscript."""

from runners import rscript

main, build_model, load_canonical, predict_logits, train_steps = rscript.task(__file__)
