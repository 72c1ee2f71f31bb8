# R 4.2 · MXNet 1.9 Gluon through reticulate · gru · embedding → GRU(100) → dense 2 on IMDB sentiment, Adam; the
# fused gluon$rnn$GRU (cuDNN's GRU on GPU, MKL-DNN's on CPU). The R twin of runners/mxnet_gluon/gru.py.
source(file.path(Sys.getenv("ROSETTA_ROOT", unset = "."), "runners", "r_mxnet", "mxnet.R"))

# ==== Config ====
SIZES <- import("shared.params")$GRU   # the canonical sizes (max_features, embedding_dim, hidden, …)
# Hyperparameters come from shared/params.py through cfg$params (max_features, maxlen, hidden, epochs, lr, …).
SWITCHES <- list(
  hybridize = TRUE,          # cache the graph: embedding, fused GRU and dense run as one program (seed lesson 15)
  static_alloc = TRUE,       # hybridize(static_alloc): allocate the graph's memory once and reuse it every step
  static_shape = TRUE,       # hybridize(static_shape): every batch is (64, 150), so plan the graph once
  cudnn_autotune = TRUE,     # MXNET_CUDNN_AUTOTUNE_DEFAULT (conv algorithm search; the cuDNN RNN needs none)
  data_placement = "host"    # host: copy each batch inside the clock (the rule for every framework);
                             # device: the whole set on the device before the clock (lesson 13)
)
# Adam: ε = 1e-8 as everywhere, but MXNet adds it before the bias correction (ADAM_EPSILON_HAT, in `differences`).
amp <- import("mxnet.contrib.amp", convert = FALSE)


# ==== Data ====
# IMDB as token ids (N, maxlen), Keras convention, front-padded; the training set allocated once in host memory or on
# `ctx` (`placement`), the test set on the host (evaluation is outside the clock). Token ids as float32: MXNet's
# Embedding takes float indices (exact up to 2^24, far above 30,000).
load_data <- function(cfg, ctx, placement) {
  p <- cfg$params
  stopifnot("data_placement is host or device" = placement %in% c("host", "device"))
  d <- datasets$load_imdb(cfg$data, p$max_features, p$maxlen, p$train_samples, p$test_samples) |>
    unpack(c("x_train", "y_train", "x_test", "y_test"))
  train_ctx <- if (placement == "device") ctx else mx$cpu()
  list(x_train = mx$nd$array(d$x_train, ctx = train_ctx), y_train = mx$nd$array(d$y_train, ctx = train_ctx,
                                                                                 dtype = "int32"),
       x_test = mx$nd$array(d$x_test), y_test = d$y_test)
}


# ==== Model ====
# rosetta: model
# A HybridSequential with named children (PyTorch's Sequential(OrderedDict) idiom, runners.mxnet_gluon's
# named_sequential), so the parameters carry the Python runner's structural names. Keras' initializers, so every
# framework starts from the same distributions: embedding U(±0.05), input kernels Glorot uniform, recurrent kernels
# orthogonal (gain 1), zero biases. The fused GRU is the cuDNN formulation: gates (r, z, n), reset after the
# recurrent matmul, two biases — the canonical GRU, so weights load unchanged.
build_model <- function(ctx = mx$cpu(), max_features = SIZES$max_features,
                        embedding_dim = SIZES$embedding_dim, hidden = SIZES$hidden,
                        num_classes = SIZES$num_classes) {
  last_step <- \(F, x) F$slice_axis(x, axis = 1L, begin = -1L, end = NULL)  # (N, T, h) → (N, 1, h): front padding
  net <- py_gluon$named_sequential(                                          # makes the last step real text
    tuple("embedding", nn$Embedding(as.integer(max_features), as.integer(embedding_dim),
                                    weight_initializer = mx$init$Uniform(0.05))),
    tuple("gru", gluon$rnn$GRU(as.integer(hidden), layout = "NTC", input_size = as.integer(embedding_dim),
                               i2h_weight_initializer = py_gluon$GLOROT_UNIFORM,
                               h2h_weight_initializer = mx$init$Orthogonal(1.0))),
    tuple("last", nn$HybridLambda(last_step)),      # traced once by hybridize(): R is not called per step
    tuple("fc", nn$Dense(as.integer(num_classes), in_units = as.integer(hidden),   # flattens (N, 1, h) to (N, h)
                         weight_initializer = py_gluon$GLOROT_UNIFORM))
  )
  net$initialize(ctx = ctx)
  net
}

# rosetta: init
# canonical name → Gluon structural name (the fused layer's parameters are named by its per-step cells).
CANONICAL_NAMES <- c("embedding.weight" = "embedding.weight", "gru.weight_ih" = "gru._unfused.0.i2h_weight",
                     "gru.weight_hh" = "gru._unfused.0.h2h_weight", "gru.bias_ih" = "gru._unfused.0.i2h_bias",
                     "gru.bias_hh" = "gru._unfused.0.h2h_bias", "fc.weight" = "fc.weight", "fc.bias" = "fc.bias")

# rosetta: init
load_canonical <- function(model, weights) {
  py_gluon$load_structural(model, setNames(weights, CANONICAL_NAMES[names(weights)]) |> dict())
}

predict_logits <- function(model, x) py_call(model, mx$nd$array(x))$asnumpy()


# ==== Train step ====
# rosetta: optimizer
make_trainer <- function(net, p) {
  gluon$Trainer(net$collect_params(), "adam",
                dict(learning_rate = p$lr, beta1 = p$beta1, beta2 = p$beta2, epsilon = p$eps))
}

# rosetta: train-step
# One step on a batch (x, y): copy to the context inside the clock, record the forward pass, backward, update. Nothing
# here waits for the engine (no asnumpy(), lesson 13).
make_train_step <- function(net, trainer, ctx, use_amp) {
  # rosetta: loss
  loss_fn <- gluon$loss$SoftmaxCrossEntropyLoss()
  # rosetta: end
  function(batch) {
    xy <- py_items(batch) |> lapply(\(a) a$as_in_context(ctx))    # host → device inside the clock
    with(autograd$record(), {
      loss <- py_call(loss_fn, py_call(net, xy[[1]]), xy[[2]])
      if (use_amp) {
        with(amp$scale_loss(loss, trainer) %as% scaled, autograd$backward(scaled))
      } else {
        loss$backward()
      }
    })
    trainer$step(py_get_item(xy[[1]]$shape, 0L))                  # mean over the batch
    loss
  }
}

# The training-equivalence test's entry (tests/test_training_equivalence.py, through runners/rscript.R's
# train_probe): from canonical `weights`, `steps` steps on the one batch (x, y) with main's network, trainer and step;
# the Python Gluon runner's reader returns the weights in the canonical layout (the same structural names).
train_steps <- function(cfg, weights, x, y, steps) {
  switches <- resolve_switches(SWITCHES, cfg)
  ctx <- mx$cpu()
  net <- build_model(ctx)
  load_canonical(net, weights)
  if (isTRUE(switches$hybridize)) {
    net$hybridize(static_alloc = switches$static_alloc, static_shape = switches$static_shape)
  }
  train_step <- make_train_step(net, make_trainer(net, cfg$params), ctx, FALSE)
  batch <- tuple(mx$nd$array(x), mx$nd$array(y, dtype = "int32"))
  read_canonical <- import("runners.mxnet_gluon.gru", convert = FALSE)$read_canonical
  losses <- list()
  after <- list()
  for (s in seq_len(steps)) {
    losses[[s]] <- py_to_r(train_step(batch)$mean()$asscalar()$item())
    after[[s]] <- read_canonical(net)
  }
  tuple(losses, after)
}


# ==== Evaluate ====
# rosetta: evaluate
# Test accuracy outside the clock, every test review scored once (the last batch may be smaller).
evaluate <- function(net, x_test, y_test, batch_size, ctx) {
  logits <- batching$eval_batches(py_len(x_test), as.integer(batch_size)) |>
    iterate(\(idx) {
      rows <- as.integer(range(py_to_r(idx)))    # numpy int64 arrives as R double
      py_call(net, x_test$slice_axis(axis = 0L, begin = rows[1], end = rows[2] + 1L)$as_in_context(ctx))
    })
  do.call(mx$nd$concat, c(logits, dim = 0L))$astype("float32")$asnumpy() |> metrics$accuracy(y_test)
}


# ==== Main ====
main <- function(cfg) {
  p <- cfg$params
  switches <- resolve_switches(SWITCHES, cfg)
  ctx <- context_of(cfg)
  # rosetta: precision
  use_amp <- py_to_r(py_gluon$check_precision(cfg$precision, ctx))
  Sys.setenv(MXNET_CUDNN_AUTOTUNE_DEFAULT = if (isTRUE(switches$cudnn_autotune)) "1" else "0")
  if (use_amp) amp$init()
  # rosetta: end
  mx$random$seed(0L)
  d <- load_data(cfg, ctx, switches$data_placement)
  net <- build_model(ctx, p$max_features, p$embedding_dim, p$hidden, p$num_classes)
  load_canonical(net, canonical_init("gru"))   # the same start in every framework (docs/design.md)
  if (isTRUE(switches$hybridize)) {
    net$hybridize(static_alloc = switches$static_alloc, static_shape = switches$static_shape)
  }
  # rosetta: optimizer
  trainer <- make_trainer(net, p)
  if (use_amp) amp$init_trainer(trainer)
  # rosetta: end
  train_step <- make_train_step(net, trainer, ctx, use_amp)

  losses <- py_eval("[]", convert = FALSE)     # every step's per-sample losses, left on the device
  clock <- timing$timed_epochs(
    as.integer(p$epochs), \(epoch) py_gluon$train_batches(d$x_train, d$y_train, as.integer(p$batch_size), epoch),
    train_step, sync, outputs = losses
  ) |> unpack(c("epoch_seconds", "warmup", "loss", "windows"))

  accuracy <- evaluate(net, d$x_test, d$y_test, p$batch_size, ctx)
  steps <- py_to_r(batching$steps_per_epoch(py_len(d$x_train), as.integer(p$batch_size)))
  loss <- metrics$loss_metrics(lapply(py_items(losses), \(l) py_to_r(l$mean()$asscalar()$item())), steps)
  list(
    metrics = timing$train_metrics(clock$epoch_seconds, steps * p$batch_size, warmup = clock$warmup, steps = steps,
                                   windows = clock$windows, accuracy = accuracy,
                                   init = "canonical", final_loss = loss$final_loss, loss_curve = loss$loss_curve,
                                   parameters = count_parameters(net), epochs = p$epochs,
                                   train_samples = py_len(d$x_train), test_samples = py_len(d$x_test),
                                   data_placement = switches$data_placement,
                                   differences = c(list(py_gluon$ADAM_EPSILON_HAT),
                                                   if (use_amp) list(py_gluon$AMP_HOST_SYNC))),
    timing = timing$train_timing(clock$windows, warmup = clock$warmup),
    switches = c(switches, list(amp = use_amp, fused_rnn = TRUE, cudnn_rnn = py_to_r(ctx$device_type) == "gpu",
                                device = py_str(ctx), language = "R", bridge = "reticulate"))
  )
}

if (sys.nframe() == 0L) run_task(main)
