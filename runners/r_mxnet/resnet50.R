# R 4.2 · MXNet 1.9 Gluon through reticulate · resnet50 · ResNet-50 v1.5 (torchvision's definition) cut after global
# average pooling: timed feature extraction through the hybridized (cached) graph. The R twin of
# runners/mxnet_gluon/resnet50.py, whose Gluon network (HybridBlocks with torchvision's module names) it uses.
source(file.path(Sys.getenv("ROSETTA_ROOT", unset = "."), "runners", "r_mxnet", "mxnet.R"))

# ==== Config ====
# Image size, batch size and batch count come from shared/params.py (1,280 images of 224² in batches of 32 at full
# scale).
SWITCHES <- list(
  hybridize = TRUE,          # run the cached symbolic graph, not op by op (seed lesson 15)
  static_alloc = TRUE,       # hybridize(static_alloc): allocate the graph's memory once, reuse it every batch
  static_shape = TRUE,       # hybridize(static_shape): every batch has the same shape, plan once
  cudnn_autotune = TRUE,     # MXNET_CUDNN_AUTOTUNE_DEFAULT: pick the fastest conv algorithms in the warm-up pass
  pinned_memory = TRUE       # images in page-locked host memory (cpu_pinned): faster, asynchronous copies to the GPU
)
# Model: the Python Gluon runner's ResNet50 HybridBlock (torchvision's v1.5, which Gluon's zoo lacks); a HybridBlock
# subclass written in R would be traced once by hybridize() to the same graph. Weights: the canonical ones (ImageNet
# from the `weights` step, else the shared seeded init; record field `weights`). Data placement is "host".
canonical <- import("shared.canonical", convert = FALSE)
gluon_resnet <- import("runners.mxnet_gluon.resnet50", convert = FALSE)
amp <- import("mxnet.contrib.amp", convert = FALSE)


# ==== Data ====
# Random images allocated once in host memory (page-locked when they will be copied to a GPU).
load_data <- function(cfg, ctx, switches) {
  p <- cfg$params
  pinned <- py_to_r(ctx$device_type) == "gpu" && isTRUE(switches$pinned_memory)
  datasets$random_images(as.integer(p$batch_size * p$batches), as.integer(p$image_size)) |>
    mx$nd$array(ctx = if (pinned) mx$cpu_pinned() else mx$cpu())
}


# ==== Model ====
# rosetta: model
build_model <- function(ctx = mx$cpu()) {
  net <- gluon_resnet$ResNet50()
  net$initialize(ctx = ctx)       # its initialization does not matter: main loads the canonical weights
  net
}

# Canonical names are torchvision's, and so are the attribute paths (BatchNorm's γ, β renamed on the way).
load_canonical <- function(model, weights) py_gluon$load_torchvision_names(model, dict(weights))

# Pooled features (N, 2048) in inference mode (outside autograd$record): BatchNorm uses running statistics.
predict_logits <- function(model, x) py_call(model, mx$nd$array(x))$asnumpy()


# ==== Train step ====
# rosetta: inference
# Feature extraction has no training step: the timed unit is one forward pass over all images, each batch copied in
# and its features copied back (queued on the engine; the clock's barrier waits for them).
extract <- function(net, images, batch_size, ctx) {
  batching$eval_batches(py_len(images), as.integer(batch_size)) |>
    iterate(\(idx) {
      rows <- as.integer(range(py_to_r(idx)))                      # numpy int64 arrives as R double
      x <- images$slice_axis(axis = 0L, begin = rows[1], end = rows[2] + 1L)$as_in_context(ctx)
      py_call(net, x)$as_in_context(mx$cpu())
    })
}


# ==== Evaluate ====
# Sanity check of the output: one finite `dims`-d feature per image; returns their mean.
evaluate <- function(features, n, dims) {
  out <- do.call(mx$nd$concat, c(features, dim = 0L))$astype("float32")$asnumpy()
  stopifnot(identical(py_to_r(out$shape), list(as.integer(n), as.integer(dims))),
            py_to_r(np$isfinite(out)$all()$item()))
  py_to_r(out$mean()$item())
}


# ==== Main ====
main <- function(cfg) {
  p <- cfg$params
  switches <- resolve_switches(SWITCHES, cfg)
  ctx <- context_of(cfg)
  # rosetta: precision
  use_amp <- py_to_r(py_gluon$check_precision(cfg$precision, ctx))
  Sys.setenv(MXNET_CUDNN_AUTOTUNE_DEFAULT = if (isTRUE(switches$cudnn_autotune)) "1" else "0")
  if (use_amp) amp$init()                                          # float16 convolutions, float32 where it matters
  # rosetta: end
  images <- load_data(cfg, ctx, switches)
  net <- build_model(ctx)
  # rosetta: init
  weights <- canonical$load(cfg$data, "resnet50") |> unpack(c("arrays", "source"))  # ImageNet, else seeded init
  py_gluon$load_torchvision_names(net, weights$arrays)
  # rosetta: end
  if (isTRUE(switches$hybridize)) {
    net$hybridize(static_alloc = switches$static_alloc, static_shape = switches$static_shape)
  }

  features <- NULL
  passes <- timing$`repeat`(\() features <<- extract(net, images, p$batch_size, ctx),
                            repeats = as.integer(cfg$repeats), barrier = sync)
  feature_mean <- evaluate(features, py_len(images), p$features)
  list(
    metrics = timing$extraction_metrics(passes, py_len(images), p$batch_size, p$image_size, weights = weights$source,
                                        feature_mean = feature_mean, parameters = count_parameters(net),
                                        data_placement = "host", differences = list()),
    timing = passes,
    switches = c(switches, list(amp = use_amp, memory_format = "NCHW", device = py_str(ctx), language = "R",
                                bridge = "reticulate"))
  )
}

if (sys.nframe() == 0L) run_task(main)
