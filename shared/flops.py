"""Model FLOPs per sample of the four canonical networks, counted once here from their definitions (docs/design.md, "The
tasks"; shared/canonical.py): 2 FLOPs per multiply-accumulate of every convolution, matrix product and dense layer,
nothing for element-wise work (activations, BatchNorm, pooling, the GRU's gate arithmetic), as
`torch.utils.flop_counter` and XLA's cost analysis count them (tests/test_flops.py checks against PyTorch's).

A training step costs TRAINING_FACTOR × the forward pass (the backward pass computes the gradient of each product
twice: for the input and for the weights), the usual convention (Kaplan et al. 2020, MLPerf's model FLOPs).

Runs on Python 3.6 like everything a runner imports from `shared`.
"""

from typing import Any, Mapping

TRAINING_FACTOR = 3


def conv(c_in: int, c_out: int, kernel: int, h_out: int, w_out: int) -> int:
    return 2 * c_in * c_out * kernel * kernel * h_out * w_out


def dense(n_in: int, n_out: int) -> int:
    return 2 * n_in * n_out


def cnn(p: Mapping[str, Any]) -> int:
    """The VGG-style CNN on 32×32×3: four 3×3 'same' convolutions (two 2×2 pools), dense 6400 → 512 → 10."""
    return (
        conv(3, 50, 3, 32, 32)
        + conv(50, 50, 3, 32, 32)
        + conv(50, 100, 3, 16, 16)
        + conv(100, 100, 3, 16, 16)
        + dense(100 * 8 * 8, 512)
        + dense(512, p["num_classes"])
    )


def gru(p: Mapping[str, Any]) -> int:
    """Embedding (a lookup: no FLOPs) → GRU over `maxlen` steps (three gates: input and recurrent products) → dense."""
    e, h = p["embedding_dim"], p["hidden"]
    return p["maxlen"] * (dense(e, 3 * h) + dense(h, 3 * h)) + dense(h, p["num_classes"])


def out_size(size: int, kernel: int, stride: int, padding: int) -> int:
    return (size + 2 * padding - kernel) // stride + 1


def resnet50(p: Mapping[str, Any]) -> int:
    """torchvision's ResNet-50 v1.5 up to global average pooling at `image_size`² (the stride in the 3×3 conv)."""
    size = out_size(p["image_size"], 7, 2, 3)
    flops = conv(3, 64, 7, size, size)
    size = out_size(size, 3, 2, 1)  # max pool
    c_in = 64
    for width, blocks, stride in ((64, 3, 1), (128, 4, 2), (256, 6, 2), (512, 3, 2)):
        for block in range(blocks):
            s = stride if block == 0 else 1
            out = out_size(size, 3, s, 1)
            flops += (
                conv(c_in, width, 1, size, size) + conv(width, width, 3, out, out) + conv(width, 4 * width, 1, out, out)
            )
            if block == 0:  # the projected shortcut
                flops += conv(c_in, 4 * width, 1, out, out)
            c_in, size = 4 * width, out
    return flops


def densenet121(p: Mapping[str, Any]) -> int:
    """torchvision's DenseNet-121 (growth 32, bottleneck 4×32, blocks 6-12-24-16, transitions halving channels and
    size) at `crop_size`², with a new dense head of `num_classes` outputs."""
    size = out_size(p["crop_size"], 7, 2, 3)
    flops = conv(3, 64, 7, size, size)
    size = out_size(size, 3, 2, 1)  # max pool
    channels = 64
    for i, layers in enumerate((6, 12, 24, 16)):
        for _ in range(layers):
            flops += conv(channels, 128, 1, size, size) + conv(128, 32, 3, size, size)
            channels += 32
        if i < 3:  # transition: 1×1 conv to half the channels, 2×2 avg pool
            flops += conv(channels, channels // 2, 1, size, size)
            channels, size = channels // 2, size // 2
    return flops + dense(channels, p["num_classes"])


FORWARD = {"cnn": cnn, "gru": gru, "resnet50": resnet50, "densenet121": densenet121}
TRAINING = ("cnn", "gru", "densenet121")


def per_sample(task: str, p: Mapping[str, Any]) -> int:
    """FLOPs one sample costs in the cell's timed work: a training step (TRAINING_FACTOR × forward) or, for
    feature extraction, one forward pass."""
    return FORWARD[task](p) * (TRAINING_FACTOR if task in TRAINING else 1)
