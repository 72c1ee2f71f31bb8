# Knet 1.4 (Julia 1.5) · gru · embedding → GRU(100) → dense 2 on IMDB sentiment with Adam: Knet's RNN object with
# rnnType=:gru (cuDNN's fused GRU on the GPU), as the seed's Knet_RNN notebook and Knet's IMDB tutorial write it.
#
# Run by runners/julia_knet/gru.py (`python -m runners julia-knet gru …`), which loads the data through shared/ and
# hands it over as .npy files; see common.jl for that contract.

using Knet
include("common.jl")

# ==== Config ====
# Hyperparameters come from shared/params.json (task_params): max_features, maxlen, embedding_dim, hidden, epochs,
# batch_size, lr, beta1, beta2, eps, train/test samples.
const SWITCHES = Dict{String,Any}(
    "array_type" => "CuArray",      # Knet 1.4's GPU default (CUDA.jl arrays); "KnetArray": Knet's own, the seed's
)
# Data placement is "host" (every framework's rule): the word ids stay in host memory and index the embedding, which
# lives on the device, so each step's (E, B, T) gather is the only per-step transfer; there is nothing to pre-place.

# ==== Data ====
"""IMDB as shared.datasets.load_imdb returned it (Keras' conventions, front-padded with 0): NumPy's (N, maxlen) word
ids read column-major are (maxlen, N), one review per column; ids shift by one to index Julia's 1-based embedding
columns, labels by one for `nll`."""
function load_data(cfg)
    a = read_arrays(dirname(cfg["result"]))
    return a["x_train"] .+ 1, a["y_train"] .+ 1, a["x_test"] .+ 1, a["y_test"], a["orders"]
end

# ==== Model ====
struct GRUClassifier; embed; rnn; fc_w; fc_b; end

# rosetta: model
# Knet's RNN is cuDNN's formulation on the GPU and on the CPU alike: gates (r, z, n) with two bias vectors and the
# reset gate applied after the recurrent matmul, n = tanh(Wn·x + bWn + r .* (Rn·h + bRn)) (`@doc RNN`): the
# canonical GRU, no conversion. Its weights are one flat Param; `rnnparam(rnn, layer, id, 1|2)` views one matrix or
# bias inside it (ids 1:3 input r, z, n; 4:6 recurrent).
function GRUClassifier(vocabulary, embedding, hidden, classes)
    keras_uniform(d...) = 0.1f0 .* rand(Float32, d...) .- 0.05f0        # Keras' embedding init, U(−0.05, 0.05)
    GRUClassifier(param(embedding, vocabulary; init=keras_uniform),     # (E, V): one column per word id
                  RNN(embedding, hidden; rnnType=:gru),                 # Glorot-uniform matrices, zero biases
                  param(classes, hidden), param0(classes))
end

# rosetta: model
function (m::GRUClassifier)(x)                        # x: (T, B) word ids, 1-based
    e = m.embed[:, permutedims(x)]                    # (E, B, T): Knet's RNN input is (features, batch, time)
    h = m.rnn(e)                                      # (H, B, T); the hidden state starts at zero in every call
    return m.fc_w * h[:, :, end] .+ m.fc_b            # last time step only (front padding makes it real text)
end

# rosetta: loss
(m::GRUClassifier)(x, y) = nll(m(x), y)

# rosetta: model
build_model(p) = GRUClassifier(p["max_features"], p["embedding_dim"], p["hidden"], p["num_classes"])

# rosetta: init
"""Load canonical weights (NumPy arrays by canonical name, as read_npy returns them). The (V, E) embedding arrives as
(E, V), Knet's layout; the stacked (3H, X) gate matrices arrive as (X, 3H), whose H-column blocks r, z, n are the
transposed matrices `rnnparam` views; the flat weights are filled on the CPU and moved once, as RNN() itself does."""
function load_canonical!(m::GRUClassifier, w, atype)
    copyto!(m.embed.value, atype(w["embedding.weight"]))
    H = Int(m.rnn.hiddenSize)
    m.rnn.w = Array(value(m.rnn.w))
    for (g, block) in enumerate((1:H, H+1:2H, 2H+1:3H))                # r, z, n
        copyto!(rnnparam(m.rnn, 1, g, 1), w["gru.weight_ih"][:, block])
        copyto!(rnnparam(m.rnn, 1, g + 3, 1), w["gru.weight_hh"][:, block])
        copyto!(rnnparam(m.rnn, 1, g, 2), w["gru.bias_ih"][block])
        copyto!(rnnparam(m.rnn, 1, g + 3, 2), w["gru.bias_hh"][block])
    end
    m.rnn.w = Param(convert(atype, m.rnn.w))
    copyto!(m.fc_w.value, atype(permutedims(w["fc.weight"])))
    copyto!(m.fc_b.value, atype(w["fc.bias"]))
end

count_parameters(m) = sum(length, params(m))

# ==== Train step ====
# rosetta: train-step
# One step: the loss on AutoGrad's tape, then `update!` of every Param with its own Adam state (`w.opt`, set in
# main). Knet's `adam(model, data; lr, beta1, beta2, eps)` iterator, the seed notebook's `adam!`, runs exactly this.
function train_step(model, x, y)
    J = @diff model(x, y)
    for w in params(J)
        update!(w, grad(J, w))
    end
    return value(J)
end

"One epoch of steps as a lazy iterator over the batches of the shared order."
train_steps(model, xtrn, ytrn, orders, batch_size, epoch) =
    (train_step(model, xtrn[:, idx], ytrn[idx]) for idx in train_batches(orders, batch_size, epoch))

# ==== Evaluate ====
# rosetta: evaluate
function evaluate(model, xtst, ytst, batch_size)
    logits = hcat((Array(model(xtst[:, idx])) for idx in eval_batches(length(ytst), batch_size))...)
    return accuracy_of(logits, ytst)
end

# ==== Main ====
function main(cfg)
    check_precision(cfg)
    p = task_params(cfg["params"], "gru", cfg["scale"])
    switches = resolve_switches(SWITCHES, cfg["switches"])
    atype, barrier = select_device(cfg, switches["array_type"])
    seed_all!(cfg, 0)
    xtrn, ytrn, xtst, ytst, orders = load_data(cfg)
    model = build_model(p)
    load_canonical!(model, read_arrays(dirname(cfg["result"])), atype)   # the shared canonical start (gru.py)
    # rosetta: optimizer
    for w in params(model)     # Knet's Adam adds ε after the bias correction, as PyTorch and optax do
        w.opt = Adam(lr=p["lr"], beta1=p["beta1"], beta2=p["beta2"], eps=p["eps"])
    end

    losses = Any[]                                          # every step's loss, left where it was computed
    epoch_seconds, warmup, _, windows = timed_epochs(
        epoch -> train_steps(model, xtrn, ytrn, orders, p["batch_size"], epoch), p["epochs"]; barrier=barrier,
        outputs=losses)

    accuracy = evaluate(model, xtst, ytst, p["batch_size"])
    steps = size(orders, 1) ÷ p["batch_size"]
    loss = loss_metrics(losses, steps)
    return Dict(
        "metrics" => train_metrics(epoch_seconds, steps * p["batch_size"]; warmup=warmup, steps=steps,
                                   windows=windows,
                                   accuracy=accuracy, init="canonical", final_loss=loss["final_loss"],
                                   loss_curve=loss["loss_curve"], parameters=count_parameters(model),
                                   epochs=p["epochs"], train_samples=length(ytrn), test_samples=length(ytst),
                                   data_placement="host", differences=String[]),
        "timing" => train_timing(windows; warmup=warmup),
        "switches" => merge(switches, Dict("cudnn_rnn" => cfg["device"] == "gpu", "device" => cfg["device"])),
        "system" => system_of(cfg))
end

run_task(main)
