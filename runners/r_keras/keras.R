# Helpers shared by the r-keras scripts (cnn.R, gru.R, resnet50.R): Keras 3 driven from R by raw reticulate calls
# (`keras$layers$GRU(...)`, `model$fit(...)`: the Python API spelt in R), not by the R `keras3` package's own verbs
# (`layer_gru()`, `fit()`), which is not installable here (no CRAN); with the Python Keras runners' own plumbing for
# what must match them exactly (precision policy, device check, the shared batch order, the epoch timer).
source(file.path(Sys.getenv("ROSETTA_ROOT", unset = "."), "runners", "rscript.R"))

keras <- import("keras", convert = FALSE)        # KERAS_BACKEND=tensorflow, set by `python -m runners r-keras`
layers <- keras$layers
np <- import("numpy", convert = FALSE)
datasets <- import("shared.datasets", convert = FALSE)
timing <- import("shared.timing", convert = FALSE)
metrics <- import("shared.metrics")
py_keras <- import("runners.keras", convert = FALSE)   # runners/keras/__init__.py: what the Python runners use

count_parameters <- function(model) py_to_r(py_keras$count_parameters(model))

# The image layout: NCHW where the kernels are NCHW (cuDNN), NHWC on the CPU (oneDNN), as runners.keras decides.
data_format_of <- function(switches, cfg) {
  channels_first <- switches$channels_first %||% (cfg$device == "gpu")
  if (isTRUE(channels_first)) "channels_first" else "channels_last"
}

# The shared files are NCHW; Keras' channels_last layers want NHWC (a transpose on the Python side, no copy to R).
nchw_to <- function(x, data_format) {
  if (data_format == "channels_first") x else np$ascontiguousarray(x$transpose(0L, 2L, 3L, 1L))
}

# `fit`'s input: each epoch's batches in the shared seeded order (runners.keras.EpochBatches over shared.batching).
# The batch gatherer is a Python function because TensorFlow's input pipeline calls it from its own threads, where
# R cannot run.
gather_rows <- py_eval("lambda x, y: lambda idx, epoch, rank: (x[idx], y[idx])", convert = FALSE)
epoch_batches <- function(x, y, batch_size) {
  py_keras$EpochBatches(py_len(x), as.integer(batch_size), py_call(gather_rows, x, y))
}

# The record's metrics of a `fit` timed by runners.keras.EpochTimer (the Python runners' clock): its times, the one
# loss definition (shared.metrics.loss_metrics over the timer's per-step losses), and `...`.
fit_metrics <- function(timer, batches, batch_size, ...) {
  epoch_seconds <- timer$epoch_seconds
  steps <- py_len(batches)
  loss <- import("shared.metrics", convert = FALSE)$loss_metrics(timer$step_losses(), steps)
  timing$train_metrics(epoch_seconds, steps * batch_size, warmup = timer$warmup, steps = steps,
                       windows = timer$windows, final_loss = loss$get("final_loss"),
                       loss_curve = loss$get("loss_curve"), ...)
}
