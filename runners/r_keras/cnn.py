"""r-keras · cnn: launches runners/r_keras/cnn.R (R through reticulate to Keras 3; the code to read) with Rscript."""

from runners import rscript

main, build_model, load_canonical, predict_logits, train_steps = rscript.task(__file__)
