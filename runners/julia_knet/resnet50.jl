# Knet 1.4 (Julia 1.5) · resnet50 · ResNet-50 v1.5 cut after global average pooling: timed feature extraction with
# conv4/batchnorm/pool, written like Knet's examples/resnet/resnetlib.jl (which the seed's ResNet50-Knet notebook
# used) but v1.5, torchvision's definition: the stride sits on the 3×3 conv of a bottleneck, not on the first 1×1.
#
# Run by runners/julia_knet/resnet50.py (`python -m runners julia-knet resnet50 …`), which hands over the canonical
# weights (ImageNet from the `weights` step, else the shared seeded init) as .npy files; see common.jl.

using Knet
include("common.jl")

# ==== Config ====
# Image size, batch size and batch count come from shared/params.json (1,280 images of 224² in batches of 32).
const SWITCHES = Dict{String,Any}(
    "array_type" => "CuArray",      # Knet 1.4's GPU default (CUDA.jl arrays); "KnetArray": Knet's own, the seed's
)
# Data placement is "host" by the nature of the task: the images sit in host memory and every timed pass copies each
# batch in and its features back out, as a feature extractor in production would.

# ==== Data ====
"""`n` random images (S, S, 3, n) Float32, standard normal, in host memory. Drawn by Julia's own generator (seeded):
the same distribution as shared.datasets.random_images, not the same values, which timing does not depend on."""
function load_data(p, seed)
    rng = Random.MersenneTwister(seed)
    return randn(rng, Float32, p["image_size"], p["image_size"], 3, p["batch_size"] * p["batches"])
end

# ==== Model ====
# A conv followed by inference-mode BatchNorm; `batchnorm(x, moments, params; training=false)` normalizes with the
# running statistics in `moments` (shape (1, 1, C, 1)) and scales/shifts with `params` = [γ; β] (Knet's bnparams).
struct ConvBN; w; bn; moments; stride; padding; end

function ConvBN(weights, conv, bn, atype; stride=1, padding=0)
    C = length(weights["$bn.weight"])
    stat(name) = reshape(atype(weights["$bn.$name"]), 1, 1, C, 1)
    ConvBN(atype(weights["$conv.weight"]),                               # OIHW arrives as (W, H, I, O): Knet's
           atype(vcat(weights["$bn.weight"], weights["$bn.bias"])),
           bnmoments(mean=stat("running_mean"), var=stat("running_var")), stride, padding)
end

# mode=1: cross-correlation, as canonical (and every framework's) kernels expect; BatchNorm ε = 1e-5, Knet's default.
(c::ConvBN)(x) = batchnorm(conv4(c.w, x; stride=c.stride, padding=c.padding, mode=1), c.moments, c.bn;
                           training=false)

struct Bottleneck; conv1; conv2; conv3; downsample; end

# rosetta: model
function (b::Bottleneck)(x)
    o = relu.(b.conv1(x))                           # 1×1, width
    o = relu.(b.conv2(o))                           # 3×3, width, stride 1 or 2 (v1.5)
    o = b.conv3(o)                                  # 1×1, 4·width
    return relu.(o .+ (b.downsample === nothing ? x : b.downsample(x)))
end

struct ResNet50; stem; blocks; end

# rosetta: model
function (m::ResNet50)(x)                           # x: (224, 224, 3, N)
    x = relu.(m.stem(x))                            # 7×7/2 conv: (112, 112, 64, N)
    x = pool(x; window=3, stride=2, padding=1)      # (56, 56, 64, N)
    for block in m.blocks
        x = block(x)                                # … (7, 7, 2048, N)
    end
    return mat(pool(x; window=(size(x, 1), size(x, 2)), mode=1))    # global average: (2048, N)
end

# rosetta: init
"ResNet-50 from canonical weights (torchvision's names: layer1.0.conv1.weight, layer1.0.bn1.running_mean, …)."
function build_model(w, atype)
    blocks = Bottleneck[]
    for (stage, (width, count)) in enumerate(((64, 3), (128, 4), (256, 6), (512, 3))), i in 0:count-1
        b = "layer$stage.$i"
        stride = (stage > 1 && i == 0) ? 2 : 1
        push!(blocks, Bottleneck(ConvBN(w, "$b.conv1", "$b.bn1", atype),
                                 ConvBN(w, "$b.conv2", "$b.bn2", atype; stride=stride, padding=1),
                                 ConvBN(w, "$b.conv3", "$b.bn3", atype),
                                 i == 0 ? ConvBN(w, "$b.downsample.0", "$b.downsample.1", atype; stride=stride) :
                                          nothing))
    end
    return ResNet50(ConvBN(w, "conv1", "bn1", atype; stride=2, padding=3), blocks)
end

"Trainable parameters: conv kernels and BatchNorm γ, β (the running statistics are not parameters)."
count_parameters(m) = sum(length(c.w) + length(c.bn) for c in convbns(m))
convbns(m::ResNet50) = [m.stem; [c for b in m.blocks for c in (b.conv1, b.conv2, b.conv3, b.downsample)
                                 if c !== nothing]]

# ==== Train step ====
# rosetta: inference
# Feature extraction has no training step: the timed unit is one pass over all images (`extract`), each batch copied
# to the device (atype) and its features copied back (Array), both inside the clock.
extract(model, images, batch_size, atype) =
    [Array(model(atype(images[:, :, :, idx]))) for idx in eval_batches(size(images, 4), batch_size)]

# ==== Evaluate ====
"Sanity check of the output: one finite `dims`-d feature per image; their mean for the record."
function evaluate(features, n, dims)
    out = hcat(features...)
    size(out) == (dims, n) && all(isfinite, out) || error("features of size $(size(out)), expected ($dims, $n)")
    return Float64(sum(out) / length(out))
end

# ==== Main ====
function main(cfg)
    check_precision(cfg)
    p = task_params(cfg["params"], "resnet50", cfg["scale"])
    switches = resolve_switches(SWITCHES, cfg["switches"])
    atype, barrier = select_device(cfg, switches["array_type"])
    images = load_data(p, parse_json(read(cfg["params"], String))["seed"])
    weights = read_arrays(dirname(cfg["result"]))
    model = build_model(weights, atype)

    features = []
    timing = repeat_timed(() -> push!(features, extract(model, images, p["batch_size"], atype));
                          repeats=cfg["repeats"], barrier=barrier)
    feature_mean = evaluate(features[end], size(images, 4), p["features"])
    return Dict(
        "metrics" => extraction_metrics(timing, size(images, 4), p["batch_size"], p["image_size"];
                                        weights=cfg["weights"], feature_mean=feature_mean,
                                        parameters=count_parameters(model), data_placement="host",
                                        differences=["random input images drawn by Julia's generator (same " *
                                                     "distribution as the other runners', other values)"]),
        "timing" => timing,
        "switches" => merge(switches, Dict("memory_format" => "NCHW", "device" => cfg["device"])),
        "system" => system_of(cfg))
end

run_task(main)
