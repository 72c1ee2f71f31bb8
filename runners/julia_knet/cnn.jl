# Knet 1.4 (Julia 1.5) · cnn · the VGG-style CNN on CIFAR-10 with SGD + momentum: Param structs, conv4/pool/mat,
# a `@diff` tape and `update!`, as the seed's Knet_CNN notebook and Knet's CNN tutorial write it.
#
# Run by runners/julia_knet/cnn.py (`python -m runners julia-knet cnn …`), which loads the data through shared/ and
# hands it over as .npy files; see common.jl for that contract.

using Knet
include("common.jl")

# ==== Config ====
# Hyperparameters come from shared/params.json (task_params): epochs, batch_size, lr, momentum, train/test samples.
const SWITCHES = Dict{String,Any}(
    "array_type" => "CuArray",      # Knet 1.4's GPU default (CUDA.jl arrays); "KnetArray": Knet's own, the seed's
    "data_placement" => "host",     # host: each batch copied to the device inside the clock (every framework's rule);
                                    # device: the whole training set on the device before the clock
)
# cuDNN autotune needs no switch: Knet's conv4 asks cuDNN for the fastest algorithm of each new shape once
# (cudnnFindConvolution*AlgorithmEx), in the first step, which the clock reports as the warm-up.

# ==== Data ====
"""CIFAR-10 as Python's shared.datasets.load_cifar10 returned it: images (32, 32, 3, N) Float32 in [0, 1] — NumPy's
(N, C, H, W) read column-major is Knet's (W, H, C, N) —, labels shifted to 1..10 for `nll`, and the epoch orders."""
function load_data(cfg, atype, placement)
    a = read_arrays(dirname(cfg["result"]))
    placement in ("host", "device") || error("data_placement=$placement: choose one of host, device")
    xtrn = placement == "device" ? atype(a["x_train"]) : a["x_train"]
    return xtrn, a["y_train"] .+ 1, a["x_test"], a["y_test"], a["orders"]
end

# ==== Model ====
# rosetta: model
# Knet's idiom: a layer is a struct of Params and a callable; the model is a struct of layers whose call on (x, y)
# is the loss. Kernels are (W, H, Cin, Cout); `mode=1` makes conv4 a cross-correlation, as in every other framework
# (Knet's default, mode=0, flips the kernel: a true convolution, which would load canonical weights mirrored).
struct Conv; w; b; end
Conv(cx::Int, cy::Int) = Conv(param(3, 3, cx, cy), param0(1, 1, cy, 1))   # param: Glorot uniform, like Keras
(c::Conv)(x) = conv4(c.w, x; padding=1, mode=1) .+ c.b                    # "same" padding for 3×3

struct Dense; w; b; end
Dense(i::Int, o::Int) = Dense(param(o, i), param0(o))
(d::Dense)(x) = d.w * mat(x) .+ d.b            # mat: (W, H, C, N) -> (W·H·C, N), the canonical C·H·W flatten order

struct CNN; conv1; conv2; conv3; conv4; fc1; fc2; end

# rosetta: model
function (m::CNN)(x)                                    # x: (32, 32, 3, N)
    x = relu.(m.conv1(x))
    x = relu.(pool(m.conv2(x)))                         # 2×2 max pool, then ReLU: 4× fewer elements (seed lesson 10)
    x = dropout(x, 0.25)                                # (16, 16, 50, N); dropout is on only inside @diff
    x = relu.(m.conv3(x))
    x = relu.(pool(m.conv4(x)))
    x = dropout(x, 0.25)                                # (8, 8, 100, N)
    x = dropout(relu.(m.fc1(x)), 0.5)                   # (512, N)
    return m.fc2(x)                                     # (10, N) logits: the softmax lives in nll
end

# rosetta: loss
(m::CNN)(x, y) = nll(m(x), y)                           # mean negative log-likelihood, integer labels 1..10

# rosetta: model
build_model() = CNN(Conv(3, 50), Conv(50, 50), Conv(50, 100), Conv(100, 100), Dense(6400, 512), Dense(512, 10))

# rosetta: init
"""Load canonical weights (NumPy arrays by canonical name, as read_npy returns them): OIHW kernels arrive as
(W, H, I, O), Knet's layout; dense (out, in) arrives transposed."""
function load_canonical!(m::CNN, w, atype)
    for (name, layer) in (("conv1", m.conv1), ("conv2", m.conv2), ("conv3", m.conv3), ("conv4", m.conv4))
        copyto!(layer.w.value, atype(w["$name.weight"]))
        copyto!(layer.b.value, atype(reshape(w["$name.bias"], 1, 1, :, 1)))
    end
    for (name, layer) in (("fc1", m.fc1), ("fc2", m.fc2))
        copyto!(layer.w.value, atype(permutedims(w["$name.weight"])))
        copyto!(layer.b.value, atype(w["$name.bias"]))
    end
end

count_parameters(m) = sum(length, params(m))

# ==== Train step ====
# rosetta: train-step
# One step: record the loss on AutoGrad's tape, then update every Param with its gradient and its own optimizer
# state (`w.opt`, a Momentum set in main). Knet's `minimize(model, data, Momentum(...))` iterator runs exactly this.
function train_step(model, x, y)
    J = @diff model(x, y)
    for w in params(J)
        update!(w, grad(J, w))
    end
    return value(J)                                     # no host sync: the loss stays where it was computed
end

"One epoch of steps as a lazy iterator (each iteration trains on one batch, gathered and copied in the shared order)."
train_steps(model, xtrn, ytrn, orders, batch_size, epoch, atype) =
    (train_step(model, atype(xtrn[:, :, :, idx]), ytrn[idx]) for idx in train_batches(orders, batch_size, epoch))

# ==== Evaluate ====
# rosetta: evaluate
"Test accuracy with dropout off (outside @diff), every test image scored once, the last batch possibly smaller."
function evaluate(model, xtst, ytst, batch_size, atype)
    logits = hcat((Array(model(atype(xtst[:, :, :, idx]))) for idx in eval_batches(length(ytst), batch_size))...)
    return accuracy_of(logits, ytst)
end

# ==== Main ====
function main(cfg)
    check_precision(cfg)
    p = task_params(cfg["params"], "cnn", cfg["scale"])
    switches = resolve_switches(SWITCHES, cfg["switches"])
    atype, barrier = select_device(cfg, switches["array_type"])
    seed_all!(cfg, 0)
    xtrn, ytrn, xtst, ytst, orders = load_data(cfg, atype, switches["data_placement"])
    model = build_model()
    load_canonical!(model, read_arrays(dirname(cfg["result"])), atype)   # the shared canonical start (cnn.py)
    # rosetta: optimizer
    for w in params(model)                                  # plain momentum, v = γv − lr·g; w += v (seed lesson 8)
        w.opt = Momentum(lr=p["lr"], gamma=p["momentum"])
    end

    losses = Any[]                                          # every step's loss, left where it was computed
    epoch_seconds, warmup, _, windows = timed_epochs(
        epoch -> train_steps(model, xtrn, ytrn, orders, p["batch_size"], epoch, atype), p["epochs"]; barrier=barrier,
        outputs=losses)

    accuracy = evaluate(model, xtst, ytst, p["batch_size"], atype)
    steps = size(orders, 1) ÷ p["batch_size"]
    loss = loss_metrics(losses, steps)
    return Dict(
        "metrics" => train_metrics(epoch_seconds, steps * p["batch_size"]; warmup=warmup, steps=steps,
                                   windows=windows,
                                   accuracy=accuracy, init="canonical", final_loss=loss["final_loss"],
                                   loss_curve=loss["loss_curve"], parameters=count_parameters(model),
                                   epochs=p["epochs"], train_samples=length(ytrn), test_samples=length(ytst),
                                   data_placement=switches["data_placement"], differences=String[]),
        "timing" => train_timing(windows; warmup=warmup),
        "switches" => merge(switches, Dict("memory_format" => "NCHW", "device" => cfg["device"])),
        "system" => system_of(cfg))
end

run_task(main)
