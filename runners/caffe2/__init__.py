"""Caffe2 runners (caffe2.python from PyPI's torch 1.8.1 wheel, a CUDA 10.2 build): device, provenance and the
canonical-weight mapping shared by the task modules.

The Caffe2 idiom in a few sentences: a `model_helper.ModelHelper` holds two nets, `param_init_net` (the operators that
create and fill the parameters) and `net` (the forward pass, later the backward pass and the update); `brew` helpers
(`brew.conv`, `brew.fc`, `brew.spatial_bn`, …) add a layer's operators to both and register its parameters on the
model. Nothing runs while a net is built: blobs live in a global `workspace`, arrays go in with `FeedBlob` and come
out with `FetchBlob`, `RunNetOnce(param_init_net)` initializes, and `CreateNet` once + `RunNet` per step runs the
graph. A train and a test model share weights simply by using the same blob names (the test model is built with
`init_params=False`, so it creates no parameters of its own). What a reader from other frameworks should know:
- every operator carries a DeviceOption: nets built under `core.DeviceScope(DeviceOption(CUDA, i))` run on GPU i, and
  `FeedBlob(..., device_option=...)` copies an array there; cuDNN is an operator *engine* (`use_cudnn` in brew);
- `workspace.RunNet` returns when its work is done (each operator ends with FinishDeviceComputation, a CUDA stream
  synchronize, and the async executors wait for the net's events); the clock's barrier still fetches a blob the
  net's last operator writes (`sync`), a wait that needs no such detail;
- training vs inference is not a global mode but an operator argument (`is_test` on Dropout and SpatialBN): the test
  net is a second net.
Seed lesson 12 (building Caffe2 from source for Python 3.5) is history: caffe2.python ships inside the torch 1.8.1
and 1.10.2 wheels; 1.13 dropped it.
"""

import os
import zlib

# The wheel's MKL 2020.0 runs its generic, non-AVX2 kernels on AMD CPUs unless MKL_DEBUG_CPU_TYPE=5 (measured on an AMD
# EPYC: 9.8 vs 33 GFLOPS in a matrix multiply, cnn 2× slower); the MKLs in today's wheels need no such hint, and Intel
# CPUs ignore it. Set before MKL loads, unless the user set it; the record keeps the value (mkl_debug_cpu_type).
os.environ.setdefault("MKL_DEBUG_CPU_TYPE", "5")

import numpy as np
from caffe2.proto import caffe2_pb2
from caffe2.python import core, workspace

from shared import batching
from shared.record import GpuMissing, Skip

# Without GlobalInit Caffe2 warns on first use; log level 2 keeps its INFO/WARNING chatter (engine fallbacks, net
# creation) out of the cell's log.
workspace.GlobalInit(["caffe2", "--caffe2_log_level=2"])

BUILD = workspace.C.get_build_options()  # the wheel's build: TORCH_VERSION, CUDA_VERSION, CUDNN_VERSION, BLAS_INFO
CPU = core.DeviceOption(caffe2_pb2.CPU)
IDEEP = core.DeviceOption(caffe2_pb2.IDEEP)  # the CPU through Intel's MKL-DNN (ideep) operators, built into the wheel


def _visible_gpus():
    """CUDA devices Caffe2 sees. The wheel's GPU extension (caffe2_pybind11_state_gpu, with the CUDA and cuDNN
    operators in libtorch_cuda.so) loads even without a driver; `workspace.has_gpu_support` is then False because
    it also asks for a device, and NumCudaDevices() is 0."""
    return workspace.NumCudaDevices() if workspace.has_cuda_support else 0


def framework_info():
    count = _visible_gpus()
    return {
        "framework_version": BUILD["TORCH_VERSION"],  # Caffe2 has no version of its own since it joined PyTorch
        "numpy_version": np.__version__,
        "cuda_build": BUILD.get("CUDA_VERSION") or None,  # what the wheel was compiled for …
        "cudnn_build": BUILD.get("CUDNN_VERSION") or None,
        "cuda": BUILD["CUDA_VERSION"] if count else None,  # … and what this cell could use
        "cudnn": BUILD["CUDNN_VERSION"] if count else None,
        "blas": BUILD.get("BLAS_INFO"),
        "mkl_debug_cpu_type": os.environ.get("MKL_DEBUG_CPU_TYPE"),
        "gpus": [workspace.GetDeviceProperties(i)["name"] for i in range(count)],
    }


# rosetta: device
def select_device(cfg, rank=0, mkldnn=False):
    """The DeviceOption a cell's nets and blobs are placed with: CPU (IDEEP with `mkldnn`), or CUDA GPU `rank`. A GPU
    cell that sees fewer GPUs than asked is a broken install or launch (status failed, so `--resume` retries it)."""
    if cfg.device == "cpu":
        return IDEEP if mkldnn else CPU
    asked, visible = max(cfg.gpus, 1), _visible_gpus()
    if visible < asked:
        raise GpuMissing(
            asked,
            visible,
            f"Caffe2 (torch {BUILD['TORCH_VERSION']}, a CUDA {BUILD['CUDA_VERSION']} "
            f"build: its CUDA operators load, but NumCudaDevices() is {visible})",
        )
    return core.DeviceOption(caffe2_pb2.CUDA, rank)


def is_gpu(device):
    return core.IsGPUDeviceType(device.device_type)


def is_ideep(device):
    return device.device_type == caffe2_pb2.IDEEP


def device_name(device):
    if is_gpu(device):
        return f"cuda:{device.device_id}"
    return "cpu (ideep: MKL-DNN)" if is_ideep(device) else "cpu"


# rosetta: precision
def check_precision(precision):
    """float32 only: Caffe2's float16 path (float16_compute, FP16 initializers) is a hand-converted GPU graph, and
    CUDA 10.2 predates TF32 and bfloat16."""
    if precision != "fp32":
        raise Skip(
            f"caffe2 runs fp32 only; {precision} is not a mode of Caffe2 in torch {BUILD['TORCH_VERSION']} "
            "(its float16 path means converting the graph by hand, and CUDA 10.2 has no TF32 or bfloat16)"
        )


# rosetta: barrier
def sync(net):
    """The training clock's barrier: fetch the blob that `net`'s last operator writes last (for a training net, the
    parameter its final MomentumSGDUpdate writes: fc2's bias in the cnn, 10 floats). RunNet already waits for its
    operators; this fetch makes the wait explicit and depends on no executor detail, as the copy to the host cannot
    finish before the operator that writes the blob has. Returns the fetched array (the test checks it)."""
    blob = net.Proto().op[-1].output[-1]
    return lambda: workspace.FetchBlob(blob)


def seed_ops(net, seed):
    """Give every operator of `net` its own fixed random seed. Caffe2 seeds each operator's generator from its
    DeviceOption's `random_seed`, else from the clock; one shared seed would make equal-shaped fills identical, so
    each operator gets `seed` + a checksum of its first output's name (not of its position: the draws of `conv1_w`
    or `drop1` do not change when an operator is added before them). Initial weights and dropout masks then repeat
    run to run."""
    for op in net.Proto().op:
        op.device_option.random_seed = (seed + zlib.crc32(op.output[0].encode())) % 2**32


def count_parameters(model):
    """Trainable parameters: `model.params`. brew tags SpatialBN's running mean and variance as computed parameters
    (`model.GetComputedParams()`), which no optimizer updates, so they are not counted."""
    return sum(int(np.prod(model.get_param_info(p).shape)) for p in model.params)


# Canonical (torchvision) names -> blob names. brew names a layer's blobs after its output blob: conv/fc `<layer>_w`,
# `<layer>_b`; spatial_bn `<layer>_s` (γ), `_b` (β), `_rm` (running mean), `_riv` (running variance: "inv var" is a
# legacy name, SpatialBN takes and keeps the variance). Layer paths join with `_`: `layer1.0.downsample.1` ->
# `layer1_0_downsample_1`. Layouts agree: conv kernels OIHW (NCHW order), FC weights (out, in).
LAYER_SUFFIX = {"weight": "w", "bias": "b"}
BATCHNORM_SUFFIX = {"weight": "s", "bias": "b", "running_mean": "rm", "running_var": "riv"}


def blob_name(name, batchnorms=()):
    """`layer1.0.bn1.running_var` -> `layer1_0_bn1_riv`; `batchnorms` are the canonical prefixes of BatchNorms."""
    prefix, leaf = name.rsplit(".", 1)
    return f"{prefix.replace('.', '_')}_{(BATCHNORM_SUFFIX if prefix in batchnorms else LAYER_SUFFIX)[leaf]}"


def feed_canonical(model, weights, device=CPU, batchnorms=()):
    """Feed canonical weights into the workspace blobs of `model`'s parameters, strictly: every parameter and
    statistic set, no name left over, every shape as the model declared it."""
    declared = {str(p): tuple(model.get_param_info(p).shape) for p in model.GetAllParams()}
    fed = set()
    for name, w in weights.items():
        blob = blob_name(name, batchnorms)
        if blob not in declared:
            raise ValueError(f"{name}: the model has no blob {blob}")
        if declared[blob] != np.shape(w):
            raise ValueError(f"{name}: canonical shape {np.shape(w)}, blob {blob} is {declared[blob]}")
        workspace.FeedBlob(blob, np.ascontiguousarray(w, np.float32), device_option=device)
        fed.add(blob)
    missing = sorted(set(declared) - fed)
    if missing:
        raise ValueError(f"canonical weights lack {len(missing)} of the model's blobs, e.g. {missing[:3]}")


def train_batches(x_train, y_train, batch_size, epoch, placement):
    """One epoch of feeds ({blob: array}) in the shared order: with the data on the host each batch is gathered there
    and fed (copied to the device) by the step; with the data already on the device only the batch's indices are
    fed and the net gathers the batch itself."""
    for idx in batching.train_batches(len(x_train), batch_size, epoch):
        if placement == "device":
            yield {"index": idx.astype(np.int32)}
        else:
            yield {"data": x_train[idx], "label": y_train[idx]}


def gemm(cfg, n, dtype):
    """The calibration GEMM (shared/calibration.py): one MatMul operator on the cell's device."""
    if dtype != "float32":
        raise ValueError("Caffe2's MatMul runs float32 here")
    device = select_device(cfg)
    workspace.FeedBlob("calibration_a", np.ones((n, n), np.float32), device)
    op = core.CreateOperator("MatMul", ["calibration_a", "calibration_a"], ["calibration_c"], device_option=device)
    fetch = (lambda: workspace.FetchBlob("calibration_c")) if is_gpu(device) else (lambda: None)
    return (lambda: workspace.RunOperatorOnce(op)), fetch
