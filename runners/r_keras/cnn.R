# R 4.2 · Keras 3.15 (TensorFlow backend) through reticulate · cnn · a VGG-style CNN trained on CIFAR-10 with SGD +
# momentum via `model$fit`. The R twin of runners/keras/cnn.py: the same layers, data order, clock and metrics.
source(file.path(Sys.getenv("ROSETTA_ROOT", unset = "."), "runners", "r_keras", "keras.R"))

# ==== Config ====
# Hyperparameters come from shared/params.py through cfg$params (epochs, batch_size, lr, momentum, samples).
SWITCHES <- list(
  channels_first = NULL,     # NCHW; NULL = on a GPU (cuDNN's classic layout, lesson 2), else NHWC (oneDNN kernels)
  jit_compile = "auto",      # XLA-compile the train step; Keras' "auto": TF on GPU only
  steps_per_execution = 1L,  # batches per compiled call; >1 saves Python overhead but coarsens the warm-up timing
  dropout = TRUE             # off only in the training-equivalence test (its step must be deterministic)
)
# Data placement is "host" (the only choice with `fit` on a PyDataset): every batch is gathered in host memory in the
# shared order and copied to the device inside the clock.


# ==== Data ====
# CIFAR-10 through the project's loader (float32 NCHW in [0, 1], int32 labels), in the model's layout. The arrays
# stay numpy arrays: R holds references, nothing is copied through R.
load_data <- function(cfg, data_format) {
  p <- cfg$params
  d <- datasets$load_cifar10(cfg$data, p$train_samples, p$test_samples) |>
    unpack(c("x_train", "y_train", "x_test", "y_test"))
  d$x_train <- nchw_to(d$x_train, data_format)
  d$x_test <- nchw_to(d$x_test, data_format)
  d
}


# ==== Model ====
# Keras' defaults draw the canonical init's distribution (Glorot-uniform kernels, zero biases; lesson 7); main then
# loads the shared canonical numbers.
# rosetta: model
build_model <- function(data_format = "channels_last", dropout = TRUE) {
  rates <- if (dropout) c(0.25, 0.25, 0.5) else c(0, 0, 0)
  conv <- \(filters, name, ...) layers$Conv2D(filters, 3L, padding = "same", name = name, data_format = data_format,
                                              ...)
  pool <- \() layers$MaxPooling2D(2L, data_format = data_format)  # stride defaults to the pool size (lesson 11)
  shape <- if (data_format == "channels_first") tuple(3L, 32L, 32L) else tuple(32L, 32L, 3L)
  keras$Sequential(list(
    keras$Input(shape),
    conv(50L, "conv1", activation = "relu"),
    conv(50L, "conv2"),
    pool(),
    layers$Activation("relu"),                          # ReLU after pooling: 4x fewer elements (lesson 10)
    layers$Dropout(rates[1]),                           # (N, 16, 16, 50) or (N, 50, 16, 16)
    conv(100L, "conv3", activation = "relu"),
    conv(100L, "conv4"),
    pool(),
    layers$Activation("relu"),
    layers$Dropout(rates[2]),
    layers$Flatten(data_format = data_format),          # 6400, always in H·W·C order (Keras transposes NCHW first)
    layers$Dense(512L, activation = "relu", name = "fc1"),
    layers$Dropout(rates[3]),
    layers$Dense(10L, name = "fc2", dtype = "float32")  # logits; float32 under mixed precision (Keras guide)
  ), name = "cnn")
}

# rosetta: init
# Canonical → Keras (numpy methods, 0-based axes): conv OIHW → HWIO, dense (out, in) → (in, out), and fc1's inputs
# reordered from the canonical C·H·W flatten to Keras' H·W·C.
load_canonical <- function(model, weights) {
  set <- \(layer, ...) model$get_layer(layer)$set_weights(list(...))
  for (conv in paste0("conv", 1:4)) {
    set(conv, weights[[paste0(conv, ".weight")]]$transpose(2L, 3L, 1L, 0L), weights[[paste0(conv, ".bias")]])
  }
  fc1 <- weights[["fc1.weight"]]$reshape(512L, 100L, 8L, 8L)$transpose(2L, 3L, 1L, 0L)$reshape(6400L, 512L)
  set("fc1", fc1, weights[["fc1.bias"]])
  set("fc2", weights[["fc2.weight"]]$T, weights[["fc2.bias"]])
}

# Logits in inference mode (dropout off) for NCHW input `x`.
predict_logits <- function(model, x) {
  x <- nchw_to(np$asarray(x, dtype = "float32"), py_to_r(model$get_layer("conv1")$data_format))
  keras$ops$convert_to_numpy(py_call(model, x, training = FALSE))
}


# ==== Train step ====
# rosetta: train-step
# Keras owns the training loop: `compile()` fixes loss and optimizer and `fit()` runs the step. This function is the
# whole of what a Keras user writes for it.
compile_model <- function(model, cfg, switches) {
  p <- cfg$params
  model$compile(
    # rosetta: optimizer
    optimizer = keras$optimizers$SGD(learning_rate = p$lr, momentum = p$momentum),  # plain momentum (lesson 8)
    # rosetta: loss
    loss = keras$losses$SparseCategoricalCrossentropy(from_logits = TRUE),  # integer labels, softmax inside (6, 11)
    jit_compile = switches$jit_compile, steps_per_execution = as.integer(switches$steps_per_execution)
  )
}

train_step <- function(model, batches, cfg, switches, timer) {
  compile_model(model, cfg, switches)
  model$fit(batches, epochs = as.integer(cfg$params$epochs), shuffle = FALSE,
            callbacks = list(batches$callback, timer), verbose = 0L)
}

# The training-equivalence test's entry (tests/test_training_equivalence.py, through runners/rscript.R's
# train_probe): from canonical `weights`, `steps` steps of `fit` on the one batch (x: NCHW, y) as main compiles the
# model; the runners.keras helper fits and reads the weights back (the Python runner's canonical reader: same layers).
train_steps <- function(cfg, weights, x, y, steps) {
  switches <- resolve_switches(SWITCHES, cfg)
  model <- build_model("channels_last", dropout = switches$dropout)
  load_canonical(model, weights)
  compile_model(model, cfg, switches)
  py_keras$fit_steps(model, nchw_to(np$asarray(x, dtype = "float32"), "channels_last"), np$asarray(y, dtype = "int32"),
                     steps, import("runners.keras.cnn", convert = FALSE)$read_canonical)
}


# ==== Evaluate ====
# rosetta: evaluate
# predict() runs in inference mode (dropout off, lesson 4) over every test sample, the last partial batch too.
evaluate <- function(model, x_test, y_test, batch_size) {
  model$predict(x_test, batch_size = as.integer(batch_size), verbose = 0L) |>
    np$asarray(dtype = "float32") |>
    metrics$accuracy(y_test)
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
  d <- load_data(cfg, data_format)
  model <- build_model(data_format, dropout = switches$dropout)
  load_canonical(model, canonical_init("cnn"))   # the same start in every framework (docs/design.md)
  batches <- epoch_batches(d$x_train, d$y_train, p$batch_size)
  # rosetta: barrier
  timer <- py_keras$EpochTimer()
  train_step(model, batches, cfg, switches, timer)

  accuracy <- evaluate(model, d$x_test, d$y_test, p$batch_size)
  list(
    metrics = fit_metrics(timer, batches, p$batch_size, accuracy = accuracy, init = "canonical",
                          parameters = count_parameters(model), epochs = p$epochs,
                          train_samples = py_len(d$x_train), test_samples = py_len(d$x_test),
                          data_placement = "host", differences = py_to_r(py_keras$FIT_HOST_SYNCS)),
    timing = timing$train_timing(timer$windows, warmup = timer$warmup),
    switches = c(switches, list(data_format = data_format, dtype_policy = policy,
                                jit_compile_resolved = model$jit_compile, backend = keras$backend$backend(),
                                language = "R", bridge = "reticulate"))
  )
}

if (sys.nframe() == 0L) run_task(main)
