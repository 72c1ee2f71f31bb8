# R 4.2 · Keras 3.15 (TensorFlow backend) through reticulate · resnet50 · ResNet-50 v1.5 (torchvision's definition)
# written with Keras' functional API from R, cut after global average pooling: timed feature extraction with
# `model$predict_on_batch`, batch by batch. The R twin of runners/keras/resnet50.py (its network:
# runners/keras/networks.py).
source(file.path(Sys.getenv("ROSETTA_ROOT", unset = "."), "runners", "r_keras", "keras.R"))

# ==== Config ====
# Image size, batch size and batch count come from shared/params.py (1,280 images of 224² in batches of 32 at full
# scale).
SWITCHES <- list(
  channels_first = NULL,     # NCHW; NULL = on a GPU (cuDNN's classic layout, lesson 2), else NHWC
  jit_compile = "auto"       # XLA-compile predict; Keras' "auto": TF on GPU only
)
# Not keras$applications$ResNet50: that is ResNet v1 (stride on the first 1×1 conv, conv biases), another network.
# Weights: the canonical ones (ImageNet from the `weights` step, else the shared seeded init; record field `weights`).
# Data placement is "host": every timed pass copies each batch in and its features back out.
# Not `model$predict(images)` per pass: on the TF backend each call makes a tf.data iterator whose start-up left both
# cores idle ~0.23 s inside the clock in about half the passes (docs/verify.md); `predict_on_batch` runs the same
# compiled predict function on one batch, with no input pipeline.
batching <- import("shared.batching", convert = FALSE)
canonical <- import("shared.canonical", convert = FALSE)
slice <- import_builtins(convert = FALSE)$slice               # images[start:stop], a view as in the Python runner
networks <- import("runners.keras.networks", convert = FALSE)   # the canonical → Keras weight mapping, by layer name


# ==== Data ====
# Random images in host memory, in the model's layout; every timed pass copies them to the device.
load_data <- function(cfg, data_format) {
  p <- cfg$params
  datasets$random_images(as.integer(p$batch_size * p$batches), as.integer(p$image_size)) |> nchw_to(data_format)
}


# ==== Model ====
# rosetta: model
# torchvision's ResNet-50 v1.5 up to global average pooling, layer names torchvision's module paths with "_" for ".".
# Convolutions have no bias (BatchNorm follows each); torchvision pads k×k convolutions by k %/% 2 on every side,
# where Keras' "same" would pad a stride-2 convolution on the bottom/right only, so padding is explicit.
build_model <- function(data_format = "channels_last") {
  axis <- if (data_format == "channels_first") 1L else -1L
  apply_layer <- \(x, layer) py_call(layer, x)           # Keras' functional API: a layer called on a tensor
  conv_bn <- function(x, filters, kernel, stride, name, bn_name, relu = TRUE) {
    if (kernel > 1) x <- apply_layer(x, layers$ZeroPadding2D(kernel %/% 2L, data_format = data_format))
    x <- x |>
      apply_layer(layers$Conv2D(filters, kernel, stride, use_bias = FALSE, data_format = data_format, name = name)) |>
      apply_layer(layers$BatchNormalization(axis, epsilon = 1e-5, momentum = 0.9, name = bn_name))
    if (relu) apply_layer(x, layers$ReLU()) else x
  }
  bottleneck <- function(x, width, stride, name) {
    y <- x |>
      conv_bn(width, 1L, 1L, paste0(name, "_conv1"), paste0(name, "_bn1")) |>
      conv_bn(width, 3L, stride, paste0(name, "_conv2"), paste0(name, "_bn2")) |>       # v1.5: the stride is here
      conv_bn(4L * width, 1L, 1L, paste0(name, "_conv3"), paste0(name, "_bn3"), relu = FALSE)
    channels <- py_to_r(py_get_item(x$shape, axis))
    if (stride != 1L || channels != 4L * width) {                                      # projection shortcut
      x <- conv_bn(x, 4L * width, 1L, stride, paste0(name, "_downsample_0"), paste0(name, "_downsample_1"),
                   relu = FALSE)
    }
    py_call(layers$Add(), list(y, x)) |> apply_layer(layers$ReLU())
  }
  inputs <- keras$Input(if (axis == 1L) list(3L, NULL, NULL) else list(NULL, NULL, 3L))
  x <- inputs |>
    conv_bn(64L, 7L, 2L, "conv1", "bn1") |>                                            # (N, H/2, W/2, 64)
    apply_layer(layers$ZeroPadding2D(1L, data_format = data_format)) |>
    apply_layer(layers$MaxPooling2D(3L, 2L, data_format = data_format))               # (N, H/4, W/4, 64)
  stages <- list(c(width = 64L, blocks = 3L), c(width = 128L, blocks = 4L), c(width = 256L, blocks = 6L),
                 c(width = 512L, blocks = 3L))
  for (stage in seq_along(stages)) {
    for (i in seq_len(stages[[stage]][["blocks"]]) - 1L) {
      stride <- if (stage > 1L && i == 0L) 2L else 1L
      x <- bottleneck(x, stages[[stage]][["width"]], stride, sprintf("layer%d_%d", stage, i))
    }
  }
  features <- apply_layer(x, layers$GlobalAveragePooling2D(data_format, dtype = "float32"))  # (N, 2048)
  keras$Model(inputs, features, name = "resnet50_v1_5")
}

# Canonical → Keras layer by layer (conv OIHW → HWIO, BatchNorm's four arrays), by torchvision's names.
load_canonical <- function(model, weights) networks$load_canonical(model, weights)

# Inference mode (BatchNorm on its running statistics) on NCHW float32 `x`: (N, 2048) features.
predict_logits <- function(model, x) networks$predict_logits(model, x)


# ==== Train step ====
# rosetta: inference
# Feature extraction has no training step: the timed unit is one pass of `predict_on_batch` over all images, which
# includes the host→device copy of each batch and the device→host copy of its features.
extract <- function(model, images, batch_size) {
  batching$eval_batches(py_len(images), as.integer(batch_size)) |>
    iterate(\(idx) {
      rows <- range(unlist(py_to_r(idx$tolist())))     # reticulate 1.28 leaves a NumPy 2 array unconverted
      model$predict_on_batch(py_get_item(images, slice(rows[1], rows[2] + 1L)))
    }) |>
    np$concatenate()
}


# ==== Evaluate ====
# Sanity check of the output: one finite `dims`-d feature per image; returns their mean.
evaluate <- function(features, n, dims) {
  features <- np$asarray(features, dtype = "float32")
  stopifnot(identical(py_to_r(features$shape), list(as.integer(n), as.integer(dims))),
            py_to_r(np$isfinite(features)$all()$item()))
  py_to_r(features$mean()$item())
}


# ==== Main ====
main <- function(cfg) {
  p <- cfg$params
  switches <- resolve_switches(SWITCHES, cfg)
  # rosetta: device
  py_keras$check_device(py_config(cfg))
  # rosetta: precision
  policy <- py_keras$set_precision(cfg$precision, cfg$device)
  # rosetta: end
  data_format <- data_format_of(switches, cfg)
  keras$utils$set_random_seed(0L)
  images <- load_data(cfg, data_format)
  model <- build_model(data_format)
  # rosetta: init
  weights <- canonical$load(cfg$data, "resnet50") |> unpack(c("arrays", "source"))  # ImageNet, else seeded random
  load_canonical(model, weights$arrays)
  model$compile(jit_compile = switches$jit_compile)  # predict_on_batch() reads jit_compile from compile()

  features <- NULL
  # rosetta: barrier
  # predict_on_batch() returns numpy, so each pass ends with the features on the host: that is the barrier.
  passes <- timing$`repeat`(\() features <<- extract(model, images, p$batch_size), repeats = as.integer(cfg$repeats))
  # rosetta: end
  feature_mean <- evaluate(features, py_len(images), p$features)
  list(
    metrics = timing$extraction_metrics(passes, py_len(images), p$batch_size, p$image_size, weights = weights$source,
                                        feature_mean = feature_mean, parameters = count_parameters(model),
                                        data_placement = "host", differences = list()),
    timing = passes,
    switches = c(switches, list(data_format = data_format, dtype_policy = policy,
                                jit_compile_resolved = model$jit_compile, backend = keras$backend$backend(),
                                language = "R", bridge = "reticulate"))
  )
}

if (sys.nframe() == 0L) run_task(main)
