# The R side of the bridge (runners/rscript.py is the Python side): what every R runner script shares.
#
#   Rscript --vanilla runners/r_keras/cnn.R CONFIG.json RESULT.json      one cell: run_task(main), at a script's end
#   Rscript --vanilla runners/rscript.R probe SCRIPT IN.npz OUT.npz      the equivalence probe (tests/fw_probe.py's)
#
# A runner script defines main(cfg), which returns list(metrics, timing, switches); run_task() reads the cell from
# CONFIG.json (jsonlite) and writes RESULT.json, or list(error = list(message, skip)) when main() stops. The Python
# frameworks are reached through reticulate in the interpreter the Python side names (RETICULATE_PYTHON), with
# `convert = FALSE` wherever arrays flow: numpy arrays stay in Python and R holds references to them.

library(reticulate)

`%||%` <- function(x, y) if (is.null(x)) y else x     # base R has it from 4.4 on; Debian 12 has 4.2

rosetta_root <- function() Sys.getenv("ROSETTA_ROOT", unset = ".")


# ---- The cell and its switches ----

read_config <- function(path) jsonlite::read_json(path, simplifyVector = TRUE)

# The script's switch defaults with the command line's overrides; an unknown name is an error, as in Python
# (shared/runner.py's resolve_switches). NULL defaults survive: `[<-` on a list keeps them, modifyList() would not.
resolve_switches <- function(defaults, cfg) {
  overrides <- cfg$switches
  unknown <- setdiff(names(overrides), names(defaults))
  if (length(unknown) > 0) {
    stop(sprintf("unknown switch(es) %s for %s %s; known: %s", toString(sort(unknown)), cfg$framework, cfg$task,
                 toString(sort(names(defaults)))), call. = FALSE)
  }
  defaults[names(overrides)] <- overrides
  defaults
}

# The cell as a Python object with attributes (cfg.device, cfg.gpus, …), for the Python helpers that take a RunConfig.
py_config <- function(cfg) do.call(import("types")$SimpleNamespace, cfg[names(cfg) != "params"])

# The items of a Python sequence as an R list of references (no conversion, no copy; Python indexes from 0).
py_items <- function(seq) lapply(seq_len(py_len(seq)) - 1L, \(i) py_get_item(seq, i))

# A Python tuple as a named R list of its items: unpack(load_cifar10(...), c("x_train", "y_train", …)).
unpack <- function(tuple, names) setNames(py_items(tuple), names)

# The shared training start of `task` (shared.canonical.init_weights: drawn once in NumPy, the same numbers in every
# framework) as a named R list of numpy arrays (references, no copy), the form load_canonical takes.
canonical_init <- function(task) {
  weights <- import("shared.canonical", convert = FALSE)$init_weights(task)
  names <- import("builtins")$list(weights$keys())     # converted: a character vector
  setNames(lapply(names, \(name) py_get_item(weights, name)), names)
}

# ---- Running a cell ----

# R's message for an error, without reticulate's Python traceback (that goes to the log); and whether it is a Skip
# raised by a Python helper (shared.record.Skip: an unsupported combination, not a failure).
error_of <- function(e) {
  message <- sub("\n+Detailed traceback:.*$", "", conditionMessage(e)) |> trimws()
  skip <- startsWith(message, "shared.record.Skip: ")
  list(message = sub("^shared\\.record\\.Skip: ", "", message), skip = skip)
}

# Python's json writes the result: metrics and timing are dicts made by shared.timing, whose one-element lists
# (one epoch's seconds) jsonlite could not tell from scalars once converted to R vectors.
write_result <- function(result, path) {
  json <- import("json", convert = FALSE)
  writeLines(py_to_r(json$dumps(r_to_py(result), indent = 1L)), path)
  invisible(NULL)
}

# The entry point of a runner script: `if (sys.nframe() == 0L) run_task(main)` (true only under Rscript, not when
# the script is source()d by the probe). Exits 1 after writing the error, so the Python side reads it as a failure.
run_task <- function(main, args = commandArgs(trailingOnly = TRUE)) {
  cfg <- read_config(args[[1]])
  failure <- tryCatch(
    withCallingHandlers(write_result(main(cfg), args[[2]]),
                        error = \(e) message("R error: ", conditionMessage(e))),
    error = \(e) list(error = error_of(e))
  )
  if (!is.null(failure)) {
    jsonlite::write_json(failure, args[[2]], auto_unbox = TRUE)
    quit(save = "no", status = 1L)
  }
}

# ---- The equivalence probe ----

# Loads IN.npz (canonical weights by name, and the input batch `x`), builds the script's model, loads the weights and
# writes OUT.npz with `logits` and `parameters`: the protocol of tests/fw_probe.py, with the model built in R.
probe <- function(script, inputs, output) {
  source(script)
  np <- import("numpy", convert = FALSE)
  archive <- np$load(inputs)
  arrays <- py_to_r(archive$files) |> setNames(nm = _) |> lapply(\(name) py_get_item(archive, name))
  model <- build_model()
  load_canonical(model, arrays[names(arrays) != "x"])
  logits <- predict_logits(model, arrays$x)
  np$savez(output, logits = np$asarray(logits, dtype = "float32"), parameters = count_parameters(model))
  invisible(NULL)
}

# The training-equivalence probe (tests/fw_train_probe.py through runners/rscript.py): the script's own
# `train_steps(cfg, weights, x, y, steps)` on IN.npz (canonical start, batch `x`, labels `y`), which returns Python's
# (losses, weights after each step); runners.rscript writes them to OUT.npz.
train_probe <- function(script, config, inputs, output, steps) {
  source(script)
  np <- import("numpy", convert = FALSE)
  archive <- np$load(inputs)
  arrays <- py_to_r(archive$files) |> setNames(nm = _) |> lapply(\(name) py_get_item(archive, name))
  weights <- arrays[!names(arrays) %in% c("x", "y")]
  result <- train_steps(read_config(config), weights, arrays$x, arrays$y, as.integer(steps))
  import("runners.rscript")$save_steps(output, result)
  invisible(NULL)
}

if (sys.nframe() == 0L && identical(commandArgs(trailingOnly = TRUE)[1], "probe")) {
  args <- commandArgs(trailingOnly = TRUE)
  probe(args[[2]], args[[3]], args[[4]])
}
if (sys.nframe() == 0L && identical(commandArgs(trailingOnly = TRUE)[1], "train_probe")) {
  args <- commandArgs(trailingOnly = TRUE)
  train_probe(args[[2]], args[[3]], args[[4]], args[[5]], args[[6]])
}
