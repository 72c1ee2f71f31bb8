# R 4.2 · Keras 3.15 (TensorFlow backend) through reticulate · gru · embedding → GRU(100) → dense 2 on IMDB
# sentiment, Adam, via `model$fit`; layers$GRU runs cuDNN's fused GRU on a GPU. The R twin of runners/keras/gru.py.
source(file.path(Sys.getenv("ROSETTA_ROOT", unset = "."), "runners", "r_keras", "keras.R"))

# ==== Config ====
SIZES <- import("shared.params")$GRU   # the canonical sizes (max_features, embedding_dim, hidden, …)
# Hyperparameters come from shared/params.py through cfg$params (max_features, maxlen, hidden, epochs, lr, …).
SWITCHES <- list(
  use_cudnn = "auto",        # layers$GRU's fused cuDNN kernel where the backend has one and the GRU allows it
  jit_compile = "auto",      # XLA-compile the train step; Keras' "auto": TF on GPU only
  steps_per_execution = 1L   # batches per compiled call; >1 saves Python overhead but coarsens the warm-up timing
)
# Adam: ε = 1e-8 as everywhere, but Keras adds it before the bias correction (runners.keras' ADAM_EPSILON_HAT;
# recorded in `differences`). Data placement is "host" (the only choice with `fit` on a PyDataset).


# ==== Data ====
# IMDB as int32 token ids (N, maxlen), Keras convention, front-padded, through the project's loader.
load_data <- function(cfg) {
  p <- cfg$params
  d <- datasets$load_imdb(cfg$data, p$max_features, p$maxlen, p$train_samples, p$test_samples) |>
    unpack(c("x_train", "y_train", "x_test", "y_test"))
  lapply(d, \(a) a$astype("int32"))
}


# ==== Model ====
# rosetta: model
# Keras' default initializers are the canonical ones (uniform ±0.05 embedding, Glorot-uniform kernels, orthogonal
# recurrent kernel, zero biases). reset_after = TRUE, tanh/sigmoid, no recurrent dropout and unroll = FALSE are the
# conditions for cuDNN's GRU (the seed's CUDNN=True), and reset_after = TRUE is also the canonical GRU.
build_model <- function(use_cudnn = "auto", max_features = SIZES$max_features,
                        embedding_dim = SIZES$embedding_dim, hidden = SIZES$hidden,
                        num_classes = SIZES$num_classes) {
  keras$Sequential(list(
    keras$Input(shape = list(NULL), dtype = "int32"),   # (N, T): sequences of any length
    layers$Embedding(as.integer(max_features), as.integer(embedding_dim), name = "embedding"),
    layers$GRU(as.integer(hidden), activation = "tanh", recurrent_activation = "sigmoid", reset_after = TRUE,
               recurrent_dropout = 0, unroll = FALSE, use_cudnn = use_cudnn, name = "gru"),  # last output only
    layers$Dense(as.integer(num_classes), name = "fc", dtype = "float32")  # logits, float32 under mixed precision
  ), name = "gru_classifier")
}

# rosetta: init
# Canonical gate blocks (r, z, n), stacked along the first axis, in Keras' order (z, r, h).
zrn <- function(w) {
  gates <- np$split(w, 3L, axis = 0L) |> py_items() |> setNames(c("r", "z", "n"))
  np$concatenate(unname(gates[c("z", "r", "n")]), axis = 0L)
}

# rosetta: init
# Canonical → Keras: dense (out, in) → (in, out); GRU kernels transposed to (in, 3·units) in gate order (z, r, h);
# the input and hidden biases become the rows of Keras' (2, 3·units) bias (reset_after = TRUE).
load_canonical <- function(model, weights) {
  set <- \(layer, ...) model$get_layer(layer)$set_weights(list(...))
  set("embedding", weights[["embedding.weight"]])
  set("gru", zrn(weights[["gru.weight_ih"]])$T, zrn(weights[["gru.weight_hh"]])$T,
      np$stack(list(zrn(weights[["gru.bias_ih"]]), zrn(weights[["gru.bias_hh"]]))))
  set("fc", weights[["fc.weight"]]$T, weights[["fc.bias"]])
}

predict_logits <- function(model, x) {
  keras$ops$convert_to_numpy(py_call(model, np$asarray(x, dtype = "int32"), training = FALSE))
}


# ==== Train step ====
# rosetta: train-step
# Keras owns the training loop: `compile()` fixes loss and optimizer and `fit()` runs the step. This function is the
# whole of what a Keras user writes for it.
compile_model <- function(model, cfg, switches) {
  p <- cfg$params
  model$compile(
    # rosetta: optimizer
    # Keras' Adam default epsilon is 1e-7; the canonical value is 1e-8.
    optimizer = keras$optimizers$Adam(learning_rate = p$lr, beta_1 = p$beta1, beta_2 = p$beta2, epsilon = p$eps),
    # rosetta: loss
    loss = keras$losses$SparseCategoricalCrossentropy(from_logits = TRUE),
    jit_compile = switches$jit_compile, steps_per_execution = as.integer(switches$steps_per_execution)
  )
}

train_step <- function(model, batches, cfg, switches, timer) {
  compile_model(model, cfg, switches)
  model$fit(batches, epochs = as.integer(cfg$params$epochs), shuffle = FALSE,
            callbacks = list(batches$callback, timer), verbose = 0L)
}

# The training-equivalence test's entry (tests/test_training_equivalence.py, through runners/rscript.R's
# train_probe): from canonical `weights`, `steps` steps of `fit` on the one batch (x, y) as main compiles the model.
train_steps <- function(cfg, weights, x, y, steps) {
  switches <- resolve_switches(SWITCHES, cfg)
  model <- build_model(use_cudnn = switches$use_cudnn)
  load_canonical(model, weights)
  compile_model(model, cfg, switches)
  py_keras$fit_steps(model, np$asarray(x, dtype = "int32"), np$asarray(y, dtype = "int32"), steps,
                     import("runners.keras.gru", convert = FALSE)$read_canonical)
}


# ==== Evaluate ====
# rosetta: evaluate
# predict() runs in inference mode over every test sample, the last partial batch too.
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
  keras$utils$set_random_seed(0L)
  d <- load_data(cfg)
  model <- build_model(use_cudnn = switches$use_cudnn, max_features = p$max_features,
                       embedding_dim = p$embedding_dim, hidden = p$hidden, num_classes = p$num_classes)
  load_canonical(model, canonical_init("gru"))   # the same start in every framework (docs/design.md)
  batches <- epoch_batches(d$x_train, d$y_train, p$batch_size)
  # rosetta: barrier
  timer <- py_keras$EpochTimer()
  train_step(model, batches, cfg, switches, timer)

  accuracy <- evaluate(model, d$x_test, d$y_test, p$batch_size)
  list(
    metrics = fit_metrics(timer, batches, p$batch_size, accuracy = accuracy, init = "canonical",
                          parameters = count_parameters(model), epochs = p$epochs,
                          train_samples = py_len(d$x_train), test_samples = py_len(d$x_test),
                          data_placement = "host",
                          differences = c(list(py_keras$ADAM_EPSILON_HAT), py_to_r(py_keras$SPARSE_SQUARES),
                                          py_to_r(py_keras$FIT_HOST_SYNCS))),
    timing = timing$train_timing(timer$windows, warmup = timer$warmup),
    # what ran, not what the device allows: the switch, the device and Keras' own dispatch test together
    switches = c(switches, list(cudnn_rnn = py_keras$cudnn_gru(model$get_layer("gru"), cfg$device, model$jit_compile),
                                dtype_policy = policy,
                                jit_compile_resolved = model$jit_compile, backend = keras$backend$backend(),
                                adam_epsilon = sprintf("%g, before bias correction (Keras)", p$eps),
                                language = "R", bridge = "reticulate"))
  )
}

if (sys.nframe() == 0L) run_task(main)
