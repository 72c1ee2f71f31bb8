# The contract side of the Julia runners (Julia 1.5, no packages): the config and params in, arrays in, the result
# out, and the timing vocabulary of shared/timing.py. The task files (cnn.jl, gru.jl, resnet50.jl) load Knet first,
# then include this file; it never uses Knet itself except in the device helpers at the end, which only task files
# call. Run on its own it is the contract check CI runs where Knet cannot be installed:
#
#     julia common.jl --contract-check CONFIG.json
#
# reads the config, the params, every array of the work folder, and writes a result of the real shape (no training).
#
# What the Python side (runners/julia_knet/__init__.py) hands over, in one work folder:
#   config.json   task, scale, precision, device, gpus, repeats, switches, params (the path of shared/params.json),
#                 result (the path to write)
#   *.npy         the arrays shared/ loaded (the data sets through shared.datasets, the epoch orders of
#                 shared.batching, canonical weights), in NumPy's own format, C order
# and what it reads back: result.json with {metrics, timing, switches, system} or {skipped} or {gpu_missing}.

import Pkg
import Random
using Statistics: median, quantile

# ---------------------------------------------------------------- JSON (the stdlib of Julia 1.5 has none)

"Parse JSON text: objects become Dict{String,Any}, arrays Vector{Any}, integers Int, other numbers Float64."
function parse_json(text::AbstractString)
    s = String(text)
    value, i = json_value(s, json_skip(s, 1))
    json_skip(s, i) > ncodeunits(s) || error("JSON: unexpected text at byte $i")
    return value
end

function json_skip(s, i)
    while i <= ncodeunits(s) && s[i] in (' ', '\t', '\n', '\r'); i = nextind(s, i); end
    return i
end

function json_value(s, i)
    c = s[i]
    if c == '{'
        d, i = Dict{String,Any}(), json_skip(s, i + 1)
        s[i] == '}' && return d, i + 1
        while true
            key, i = json_string(s, json_skip(s, i))
            i = json_skip(s, i)
            s[i] == ':' || error("JSON: expected ':' at byte $i")
            d[key], i = json_value(s, json_skip(s, i + 1))
            i = json_skip(s, i)
            s[i] == '}' && return d, i + 1
            s[i] == ',' || error("JSON: expected ',' or '}' at byte $i")
            i += 1
        end
    elseif c == '['
        a, i = Any[], json_skip(s, i + 1)
        s[i] == ']' && return a, i + 1
        while true
            v, i = json_value(s, json_skip(s, i))
            push!(a, v)
            i = json_skip(s, i)
            s[i] == ']' && return a, i + 1
            s[i] == ',' || error("JSON: expected ',' or ']' at byte $i")
            i += 1
        end
    elseif c == '"'
        return json_string(s, i)
    elseif startswith(SubString(s, i), "true");  return true, i + 4
    elseif startswith(SubString(s, i), "false"); return false, i + 5
    elseif startswith(SubString(s, i), "null");  return nothing, i + 4
    else
        m = match(r"-?\d+(\.\d+)?([eE][-+]?\d+)?", s, i)
        (m === nothing || m.offset != i) && error("JSON: unexpected character at byte $i")
        number = m.match
        return (occursin(r"[.eE]", number) ? parse(Float64, number) : parse(Int, number)), i + ncodeunits(number)
    end
end

function json_string(s, i)
    s[i] == '"' || error("JSON: expected a string at byte $i")
    out, i = IOBuffer(), i + 1
    while s[i] != '"'
        if s[i] == '\\'
            e = s[i + 1]
            if e == 'u'
                print(out, Char(parse(UInt16, s[i+2:i+5]; base=16)))
                i += 6
                continue
            end
            print(out, Dict('"' => '"', '\\' => '\\', '/' => '/', 'b' => '\b', 'f' => '\f', 'n' => '\n',
                            'r' => '\r', 't' => '\t')[e])
            i += 2
        else
            print(out, s[i])
            i = nextind(s, i)
        end
    end
    return String(take!(out)), i + 1
end

"Write `x` as JSON: Dicts, vectors, tuples, strings, numbers (NaN and Inf as null), Bool, nothing."
json(x) = (io = IOBuffer(); write_json(io, x); String(take!(io)))
write_json(io, x::AbstractDict) = (print(io, '{'); join(io, (json(string(k)) * ": " * json(v) for (k, v) in x), ", ");
                                   print(io, '}'))
write_json(io, x::Union{AbstractVector,Tuple}) = (print(io, '['); join(io, (json(v) for v in x), ", "); print(io, ']'))
write_json(io, x::Union{AbstractString,Symbol}) = print(io, '"', escape_string(string(x)), '"')
write_json(io, x::Bool) = print(io, x)
write_json(io, x::Integer) = print(io, x)
write_json(io, x::AbstractFloat) = print(io, isfinite(x) ? repr(Float64(x)) : "null")
write_json(io, ::Nothing) = print(io, "null")

# ---------------------------------------------------------------- .npy (NumPy's format, version 1-3)

const NPY_TYPES = Dict("<f4" => Float32, "<f8" => Float64, "<i4" => Int32, "<i8" => Int64, "|u1" => UInt8,
                       "|i1" => Int8, "|b1" => Bool)

"""Read a .npy file. NumPy writes C order (last index fastest), Julia reads column-major, so the dimensions come
back reversed: a (N, C, H, W) batch of images is a (W, H, C, N) Julia array, which is Knet's layout, and a
(out, in) dense matrix is its transpose (in, out)."""
function read_npy(path)
    open(path) do io
        String(read(io, 6)) == "\x93NUMPY" || error("$path: not a .npy file")
        major = read(io, UInt8); read(io, UInt8)
        headerlen = major == 1 ? Int(ltoh(read(io, UInt16))) : Int(ltoh(read(io, UInt32)))
        header = String(read(io, headerlen))
        descr = match(r"'descr':\s*'([^']+)'", header).captures[1]
        occursin(r"'fortran_order':\s*False", header) || error("$path: Fortran-ordered arrays are not read here")
        dims = Tuple(parse(Int, d) for d in split(match(r"'shape':\s*\(([^)]*)\)", header).captures[1], ',';
                                                    keepempty=false))
        haskey(NPY_TYPES, descr) || error("$path: dtype $descr is not read here")
        return read!(io, Array{NPY_TYPES[descr]}(undef, reverse(dims)...))
    end
end

"All arrays of the work folder by name (file name without .npy)."
read_arrays(folder) = Dict(splitext(f)[1] => read_npy(joinpath(folder, f)) for f in readdir(folder)
                           if endswith(f, ".npy"))

# ---------------------------------------------------------------- config, params, switches

"The config Python wrote (runners/julia_knet/__init__.py: `write_config`)."
read_config(path) = parse_json(read(path, String))

"The hyperparameters of a task at a scale, read from shared/params.json: canonical values with the scale's overrides
applied (shared.params.task_params)."
function task_params(params_path, task, scale)
    p = parse_json(read(params_path, String))
    haskey(p["tasks"], task) || error("unknown task $task; known: $(join(sort(collect(keys(p["tasks"]))), ", "))")
    haskey(p["scales"], scale) || error("unknown scale $scale; known: $(join(sort(collect(keys(p["scales"]))), ", "))")
    return merge(p["tasks"][task], get(p["scales"][scale], task, Dict{String,Any}()))
end

"The task's switch defaults with the command line's overrides; an unknown name is an error (shared.runner)."
function resolve_switches(defaults, overrides)
    unknown = setdiff(keys(overrides), keys(defaults))
    isempty(unknown) || error("unknown switch(es) $(sort(collect(unknown))); known: $(sort(collect(keys(defaults))))")
    return merge(defaults, overrides)
end

# ---------------------------------------------------------------- timing (shared/timing.py, the same numbers)

const WINDOW_STEPS = 5
const MIN_SAMPLES = 5
const UNSTABLE_SPREAD = 0.10
const WARMUP_AGREEMENT = 0.10
const WARMUP_CAP = 5

no_barrier() = nothing

"Seconds `f()` takes, with the barrier at both edges (asynchronous GPU work belongs to the interval that queued it)."
function stopwatch(f, barrier=no_barrier)
    barrier()
    start = time_ns()
    f()
    barrier()
    return (time_ns() - start) / 1e9
end

"""The `timing` block of a result record from post-warm-up samples: every value, median, quartiles (Julia's default
quantile is NumPy's linear one), and IQR / median as the spread from MIN_SAMPLES samples on, else nothing. No barrier
audit (shared/timing.py audits GPU clock edges through the CUDA driver; Knet's GPU path has none here): nothing."""
function summarize(values; warmup=nothing, unit="seconds", warm=nothing)
    values = Float64.(values)
    block = Dict{String,Any}("warmup" => warmup, "repeats" => length(values), "values" => values, "unit" => unit,
                             "warm" => warm, "median" => nothing, "min" => nothing, "max" => nothing,
                             "q1" => nothing, "q3" => nothing, "spread" => nothing, "unstable" => nothing,
                             "barrier_audit" => nothing)
    isempty(values) && return block
    med, q1, q3 = median(values), quantile(values, 0.25), quantile(values, 0.75)
    spread = length(values) >= MIN_SAMPLES && med > 0 ? (q3 - q1) / med : nothing
    merge!(block, Dict("median" => med, "min" => minimum(values), "max" => maximum(values), "q1" => q1, "q3" => q3,
                       "spread" => spread, "unstable" => spread === nothing ? nothing : spread > UNSTABLE_SPREAD))
    return block
end

"""Untimed calls of `f` until two consecutive ones agree within WARMUP_AGREEMENT (at most WARMUP_CAP), then
max(`repeats`, MIN_SAMPLES) timed ones; the summary (shared.timing.repeat)."""
function repeat_timed(f; repeats, barrier=no_barrier)
    agree(t) = length(t) >= 2 && abs(t[end] - t[end-1]) <= WARMUP_AGREEMENT * t[end-1]
    warm = Float64[]
    while length(warm) < WARMUP_CAP
        push!(warm, stopwatch(f, barrier))
        agree(warm) && break
    end
    values = [stopwatch(f, barrier) for _ in 1:max(repeats, MIN_SAMPLES)]
    return summarize(values; warmup=sum(warm), unit="seconds per pass", warm=agree(warm))
end

"""The training clock: every iteration of `steps(epoch)` is one training step (Knet's `minimize` iterator runs the
step when it is iterated), one timed interval per epoch and one sample per WINDOW_STEPS steps after the very first
step (barriers at the window edges; a window never spans two epochs). The first step (Julia's compilation of every
method it calls, cuDNN's algorithm search) is also timed on its own and returned as the warm-up; it still counts
towards its epoch. Every step's output (its loss, left on the device) is pushed to `outputs` where one is given.
Returns (epoch_seconds, warmup_seconds, last output, windows: seconds per step)."""
function timed_epochs(steps, epochs; barrier=no_barrier, window=WINDOW_STEPS, outputs=nothing)
    epoch_seconds, warmup, out, windows = Float64[], nothing, nothing, Float64[]
    for epoch in 1:epochs
        barrier()
        start = time_ns()
        in_window, window_start = 0, time_ns()   # a window holds its batches' gathering too
        for y in steps(epoch)                      # the step runs while iterating; the body sees its output
            out = y
            outputs === nothing || push!(outputs, y)
            if warmup === nothing
                barrier()
                warmup = (time_ns() - start) / 1e9
                window_start = time_ns()
                continue
            end
            in_window += 1
            if in_window == window
                barrier()
                now = time_ns()
                push!(windows, (now - window_start) / 1e9 / window)
                in_window, window_start = 0, now
            end
        end
        barrier()
        push!(epoch_seconds, (time_ns() - start) / 1e9)
    end
    return epoch_seconds, warmup, out, windows
end

"""How many of a training run's windows are warm-up, and whether it settled (shared.timing.warm_windows): every
window up to and including the first of two consecutive ones that agree, at most WARMUP_CAP."""
function warm_windows(windows)
    for i in 2:min(length(windows), WARMUP_CAP)
        abs(windows[i] - windows[i-1]) <= WARMUP_AGREEMENT * windows[i-1] && return i, true
    end
    return min(length(windows), WARMUP_CAP), false
end

"The windows after the warm-up: the samples (shared.timing.samples_of)."
samples_of(windows) = windows[warm_windows(windows)[1]+1:end]

"The training time at the steady rate (shared.timing.steady_state_seconds; `windows`: the samples)."
function steady_state_seconds(epoch_seconds; warmup=nothing, steps=nothing, windows=nothing)
    windows !== nothing && !isempty(windows) && steps !== nothing &&
        return median(windows) * steps * length(epoch_seconds)
    length(epoch_seconds) > 1 && return median(epoch_seconds[2:end]) * length(epoch_seconds)
    warmup !== nothing && steps !== nothing && steps > 1 && return (epoch_seconds[1] - warmup) * steps / (steps - 1)
    return nothing
end

"The `metrics` block of a training task (shared.timing.train_metrics)."
function train_metrics(epoch_seconds, samples_per_epoch; warmup=nothing, steps=nothing, windows=nothing, extra...)
    train_seconds = sum(epoch_seconds)
    steady = steady_state_seconds(epoch_seconds; warmup=warmup, steps=steps,
                                  windows=windows === nothing ? nothing : samples_of(windows))
    samples = samples_per_epoch * length(epoch_seconds)
    return Dict{String,Any}("train_seconds" => train_seconds, "epoch_seconds" => Float64.(epoch_seconds),
                            "steady_state_seconds" => steady, "warmup_seconds" => warmup,
                            "samples_per_second" => samples / train_seconds,
                            "steady_samples_per_second" => steady === nothing ? nothing : samples / steady,
                            (string(k) => v for (k, v) in extra)...)
end

"""`final_loss` (the mean per-step loss of the last epoch) and `loss_curve` (the first epoch's per-step losses, at
most LOSS_CURVE_STEPS) from every step's loss in order: shared.metrics.loss_metrics, the one loss definition."""
const LOSS_CURVE_STEPS = 200
function loss_metrics(step_losses, steps_per_epoch)
    losses = Float64[Float64(l) for l in step_losses]
    (isempty(losses) || steps_per_epoch < 1) && return Dict("final_loss" => nothing, "loss_curve" => Float64[])
    last_epoch = losses[max(1, end - steps_per_epoch + 1):end]
    return Dict("final_loss" => sum(last_epoch) / length(last_epoch),
                "loss_curve" => losses[1:min(steps_per_epoch, LOSS_CURVE_STEPS, length(losses))])
end

"The `timing` block of a training task (shared.timing.train_timing): the samples after the warm-up windows."
function train_timing(windows; warmup=nothing, window=WINDOW_STEPS)
    count, settled = warm_windows(windows)
    return merge(summarize(windows[count+1:end]; warmup=warmup, unit="seconds per step", warm=settled),
                 Dict{String,Any}("warmup_windows" => Float64.(windows[1:count]), "window_steps" => window))
end

"The `metrics` block of feature extraction (shared.timing.extraction_metrics)."
function extraction_metrics(timing, images, batch_size, image_size; extra...)
    return Dict{String,Any}("seconds_per_1000_images" => timing["median"] / images * 1000,
                            "samples_per_second" => images / timing["median"], "images" => images,
                            "image_size" => image_size, "batch_size" => batch_size,
                            (string(k) => v for (k, v) in extra)...)
end

# ---------------------------------------------------------------- batches (shared/batching.py)

"""The index vectors of one training epoch, 1-based, in the shared order: `orders` is the (steps·batch, epochs)
array Python wrote from shared.batching.train_batches (NumPy's (epochs, steps·batch), read column-major)."""
train_batches(orders, batch_size, epoch) = (orders[i:i+batch_size-1, epoch] .+ 1
                                            for i in 1:batch_size:size(orders, 1))

"Index ranges covering 1:n in order, the last one possibly shorter: every test sample is scored once."
eval_batches(n, batch_size) = (i:min(i + batch_size - 1, n) for i in 1:batch_size:n)

"Accuracy of logits (classes × N) against 0-based labels, computed like shared.metrics.accuracy (argmax, first wins)."
accuracy_of(logits, labels) = sum(argmax(logits[:, j]) - 1 == labels[j] for j in 1:length(labels)) / length(labels)

# ---------------------------------------------------------------- the result file

"Write the result atomically (a temp file renamed into place), as shared.record.write_atomic does."
function write_result(path, result)
    tmp = path * ".tmp"
    write(tmp, json(result) * "\n")
    mv(tmp, path; force=true)
end

"""Run `main(cfg)` and write what it returns, or the skip it raised. `ARGS`: the config path, optionally after
`--contract-check`."""
struct Skip <: Exception; reason::String; end
struct GpuMissing <: Exception; asked::Int; visible::Int; seen_by::String; end

function run_task(main)
    cfg = read_config(ARGS[end])
    result = try
        main(cfg)
    catch e
        e isa Skip || e isa GpuMissing || rethrow()
        e isa Skip ? Dict("skipped" => e.reason) :
            Dict("gpu_missing" => Dict("asked" => e.asked, "visible" => e.visible, "seen_by" => e.seen_by))
    end
    write_result(cfg["result"], result)
end

# ---------------------------------------------------------------- the contract check (no Knet)

"""Read everything a task reads and write a result of the real shape without training: the metrics come from the
timing functions above applied to `cfg["contract_check"]["epoch_seconds"]`, so a test can compare them with
shared/timing.py's numbers for the same input."""
function contract_check(cfg)
    p = task_params(cfg["params"], cfg["task"], cfg["scale"])
    arrays = read_arrays(dirname(cfg["result"]))
    fake = cfg["contract_check"]
    seconds, warmup, steps = Float64.(fake["epoch_seconds"]), fake["warmup"], fake["steps"]
    windows = Float64.(fake["windows"])
    # what Julia read: the params, and each array's shape (in NumPy's order), element type and sum
    read = Dict("params" => p, "arrays" => Dict(name => Dict("shape" => collect(reverse(size(a))),
                                                             "eltype" => string(eltype(a)),
                                                             "sum" => Float64(sum(Float64, a)))
                                                for (name, a) in arrays))
    metrics = train_metrics(seconds, steps * get(p, "batch_size", 1); warmup=warmup, steps=steps, windows=windows,
                            contract_check=read, parameters=0, differences=String[])
    return Dict("metrics" => metrics, "timing" => train_timing(windows; warmup=warmup),
                "switches" => Dict("contract_check" => true), "system" => Dict("julia_version" => string(VERSION)))
end

# ---------------------------------------------------------------- the device (Knet; only task files call these)

# rosetta: device
"""Set Knet's array type for the cell's device and return it with the clock's barrier. Knet 1.4 picks a GPU at
`using Knet` when CUDA.jl finds one and then defaults to CuArray{Float32} (`Knet.atype()`); the seed's notebooks used
Knet's own KnetArray, kept as a switch. A GPU cell without (enough) GPUs is a broken install: GpuMissing, never a skip."""
function select_device(cfg, array_type)
    CUDA = Knet.CUDA
    if cfg["device"] == "cpu"
        Knet.array_type[] = Array{Float32}
        return Array{Float32}, no_barrier
    end
    visible = CUDA.functional() ? length(CUDA.devices()) : 0
    visible < cfg["gpus"] && throw(GpuMissing(cfg["gpus"], visible, "Knet $(knet_version()) (CUDA.jl)"))
    atype = array_type == "KnetArray" ? KnetArray{Float32} : CUDA.CuArray{Float32}
    Knet.array_type[] = atype
    # rosetta: barrier
    return atype, () -> CUDA.synchronize()   # CUDA runs asynchronously: wait for queued kernels at each clock edge
end

# rosetta: precision
"Knet 1.4 trains in float32: it has no mixed precision (no autocast, no loss scaling) and no TF32 switch."
function check_precision(cfg)
    cfg["precision"] == "fp32" || throw(Skip("julia-knet runs fp32 only: Knet 1.4 has no $(cfg["precision"]) path " *
                                             "(no autocast or loss scaling; CUDA.jl 2 exposes no TF32 math mode)"))
end

"Seed Julia's generator (initial weights, dropout on the CPU) and, on a GPU, CUDA.jl's (dropout there)."
function seed_all!(cfg, seed)
    Random.seed!(seed)
    cfg["device"] == "gpu" && Knet.CUDA.seed!(seed)
end

knet_version() = string(something(get(Dict(p.name => p.version for p in values(Pkg.dependencies())), "Knet", nothing),
                                  "unknown"))

"What the record's `system` needs from Julia: its version, Knet's, CUDA's and cuDNN's, the GPUs."
function system_of(cfg)
    CUDA = Knet.CUDA
    gpu = cfg["device"] == "gpu" && CUDA.functional()
    return Dict("julia_version" => string(VERSION), "knet_version" => knet_version(),
                "cuda" => gpu ? string(CUDA.version()) : nothing,
                "cudnn" => gpu ? string(CUDA.CUDNN.version()) : nothing,
                "gpus" => gpu ? [CUDA.name(d) for d in CUDA.devices()] : String[])
end

if abspath(PROGRAM_FILE) == @__FILE__
    ARGS[1] == "--contract-check" || error("usage: julia common.jl --contract-check CONFIG.json")
    run_task(contract_check)
end
