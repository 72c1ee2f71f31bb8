# Helpers shared by the r-mxnet scripts (gru.R, resnet50.R): MXNet 1.9 Gluon reached from R through reticulate (the
# R `mxnet` package of the seed's era is long gone from CRAN), with the Python Gluon runners' own plumbing for what
# must match them exactly (contexts, precision check, the shared batch order, canonical weight loading).
source(file.path(Sys.getenv("ROSETTA_ROOT", unset = "."), "runners", "rscript.R"))

mx <- import("mxnet", convert = FALSE)
gluon <- mx$gluon
nn <- gluon$nn
autograd <- mx$autograd
np <- import("numpy", convert = FALSE)
datasets <- import("shared.datasets", convert = FALSE)
batching <- import("shared.batching", convert = FALSE)
timing <- import("shared.timing", convert = FALSE)
metrics <- import("shared.metrics")
py_gluon <- import("runners.mxnet_gluon", convert = FALSE)   # runners/mxnet_gluon/__init__.py

count_parameters <- function(net) py_to_r(py_gluon$count_parameters(net))

# rosetta: device
# The cell's first context (mx$cpu() or mx$gpu(0)); too few GPUs fails the cell, as in the Python runners.
context_of <- function(cfg) py_gluon$contexts(py_config(cfg)) |> py_get_item(0L)

# rosetta: barrier
# The clock's barrier: MXNet's engine runs asynchronously, so every clock edge waits for it (seed lesson 14).
sync <- mx$nd$waitall
