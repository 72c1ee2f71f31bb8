"""r-keras · resnet50: launches runners/r_keras/resnet50.R (R through reticulate to Keras 3; the code to read) with
Rscript."""

from runners import rscript

main, build_model, load_canonical, predict_logits, _ = rscript.task(__file__)
