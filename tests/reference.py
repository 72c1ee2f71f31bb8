"""NumPy reference forward passes of the four canonical networks, in the canonical weight layout (float32).

Written from the papers and torchvision's definitions, not from any framework's code: cnn and gru (docs/design.md's
table), ResNet-50 v1.5 cut after global average pooling (He et al. 2016, with the stride on the 3×3 conv as in
torchvision) and DenseNet-121 (Huang et al. 2017, torchvision's layer names, a 14-way head). BatchNorm is in
inference mode: running statistics, ε = 1e-5. Convolutions are im2col + one matmul, so the two ImageNet networks
run at 64×64, batch 2, in about a second.
The keyword arguments name deliberate variants (ResNet v1, another ε, TensorFlow's "same" padding): the test that
proves the reference has teeth runs them.
"""

import numpy as np

from shared.canonical import BN_EPS


def conv2d(x, w, stride=1, pad=0):
    """x (N, C, H, W), w (O, C, kh, kw) -> (N, O, Ho, Wo), no bias. `pad`: an int (the same zeros on every side, as
    torchvision pads) or ((top, bottom), (left, right))."""
    (top, bottom), (left, right) = ((pad, pad), (pad, pad)) if np.isscalar(pad) else pad
    x = np.pad(x, ((0, 0), (0, 0), (top, bottom), (left, right)))
    n, c, h, wd = x.shape
    o, _, kh, kw = w.shape
    ho, wo = (h - kh) // stride + 1, (wd - kw) // stride + 1
    if kh == kw == 1:
        cols = x[:, :, ::stride, ::stride][:, :, :ho, :wo].reshape(n, c, ho * wo)
    else:
        # im2col: (N, C, kh, kw, Ho, Wo) windows, ordered like the OIHW kernel's (C, kh, kw) axes
        cols = np.empty((n, c, kh, kw, ho, wo), x.dtype)
        for i in range(kh):
            for j in range(kw):
                cols[:, :, i, j] = x[
                    :, :, i : i + stride * (ho - 1) + 1 : stride, j : j + stride * (wo - 1) + 1 : stride
                ]
        cols = cols.reshape(n, c * kh * kw, ho * wo)
    return np.matmul(w.reshape(o, -1), cols).reshape(n, o, ho, wo)


def same_padding(size, k, stride):
    """TensorFlow's "same" padding: the extra zero goes at the bottom/right (used only as a wrong variant)."""
    total = max((-(-size // stride) - 1) * stride + k - size, 0)
    return total // 2, total - total // 2


def batchnorm(x, W, prefix, eps=BN_EPS):
    """Inference-mode BatchNorm over channels (axis 1) with the layer's running statistics."""
    scale = W[f"{prefix}.weight"] / np.sqrt(W[f"{prefix}.running_var"] + np.float32(eps))
    shift = W[f"{prefix}.bias"] - W[f"{prefix}.running_mean"] * scale
    return x * scale[None, :, None, None] + shift[None, :, None, None]


def maxpool(x, k, stride, pad=0):
    """Max pooling; padded positions never win (they are -inf, as in every framework's max pool)."""
    x = np.pad(x, ((0, 0), (0, 0), (pad, pad), (pad, pad)), constant_values=-np.inf)
    h, w = x.shape[2:]
    ho, wo = (h - k) // stride + 1, (w - k) // stride + 1
    windows = [
        x[:, :, i : i + stride * (ho - 1) + 1 : stride, j : j + stride * (wo - 1) + 1 : stride]
        for i in range(k)
        for j in range(k)
    ]
    return np.max(windows, axis=0)


def avgpool2(x):
    """2×2 average pooling, stride 2 (an odd last row/column is dropped, as a floor-mode pool does)."""
    n, c, h, w = x.shape
    h, w = h // 2 * 2, w // 2 * 2
    return x[:, :, :h, :w].reshape(n, c, h // 2, 2, w // 2, 2).mean(axis=(3, 5))


def conv2d_same(x, w, b):
    """x (N, C, H, W), w (O, C, k, k), stride 1, 'same' zero padding, plus a bias -> (N, O, H, W)."""
    return conv2d(x, w, pad=w.shape[2] // 2) + b[None, :, None, None]


def maxpool2(x):
    return maxpool(x, 2, 2)


def relu(x):
    return np.maximum(x, 0)


def cnn_forward(W, x):
    x = relu(conv2d_same(x, W["conv1.weight"], W["conv1.bias"]))
    x = relu(maxpool2(conv2d_same(x, W["conv2.weight"], W["conv2.bias"])))
    x = relu(conv2d_same(x, W["conv3.weight"], W["conv3.bias"]))
    x = relu(maxpool2(conv2d_same(x, W["conv4.weight"], W["conv4.bias"])))
    x = x.reshape(len(x), -1)  # C·H·W
    x = relu(x @ W["fc1.weight"].T + W["fc1.bias"])
    return x @ W["fc2.weight"].T + W["fc2.bias"]


def sigmoid(x):
    return 1 / (1 + np.exp(-x))


def gru_forward(W, tokens, reset_after=True):
    """Embedding -> GRU (gates r, z, n) -> last hidden state -> dense. `reset_after=False` is the original GRU
    (reset gate applied to h before the recurrent matmul, as Keras' reset_after=False and some old frameworks)."""
    emb = W["embedding.weight"][tokens]  # (N, T, E)
    Wi, Wh, bi, bh = W["gru.weight_ih"], W["gru.weight_hh"], W["gru.bias_ih"], W["gru.bias_hh"]
    H = Wh.shape[1]
    h = np.zeros((len(tokens), H), np.float32)
    for t in range(tokens.shape[1]):
        gi = emb[:, t] @ Wi.T + bi
        gh = h @ Wh.T + bh
        r = sigmoid(gi[:, :H] + gh[:, :H])
        z = sigmoid(gi[:, H : 2 * H] + gh[:, H : 2 * H])
        if reset_after:
            n = np.tanh(gi[:, 2 * H :] + r * gh[:, 2 * H :])
        else:
            n = np.tanh(gi[:, 2 * H :] + (r * h) @ Wh[2 * H :].T + bh[2 * H :])
        h = (1 - z) * n + z * h
    return h @ W["fc.weight"].T + W["fc.bias"]


def resnet50_forward(W, x, v1=False, eps=BN_EPS, tf_same=False):
    """ResNet-50 v1.5 up to global average pooling: x (N, 3, H, W) -> (N, 2048).

    Variants: `v1` puts each block's stride on its first 1×1 conv (the original paper, Keras' ResNet50); `tf_same`
    pads strided convs and the stem's max pool the TensorFlow "same" way (extra zero at the bottom/right) instead of
    torchvision's symmetric padding; `eps` changes every BatchNorm's ε.
    """

    def conv(x, w, stride):
        k = w.shape[2]
        if tf_same and stride > 1:
            return conv2d(x, w, stride, (same_padding(x.shape[2], k, stride), same_padding(x.shape[3], k, stride)))
        return conv2d(x, w, stride, k // 2)

    def bn(x, prefix):
        return batchnorm(x, W, prefix, eps)

    x = relu(bn(conv(x, W["conv1.weight"], 2), "bn1"))  # 7×7/2, pad 3
    if tf_same:
        x = np.pad(
            x, ((0, 0), (0, 0), same_padding(x.shape[2], 3, 2), same_padding(x.shape[3], 3, 2)), constant_values=-np.inf
        )
        x = maxpool(x, 3, 2)
    else:
        x = maxpool(x, 3, 2, pad=1)
    for stage, blocks in enumerate((3, 4, 6, 3), start=1):
        for i in range(blocks):
            p = f"layer{stage}.{i}"
            stride = 2 if stage > 1 and i == 0 else 1
            out = relu(bn(conv(x, W[f"{p}.conv1.weight"], stride if v1 else 1), f"{p}.bn1"))
            out = relu(bn(conv(out, W[f"{p}.conv2.weight"], 1 if v1 else stride), f"{p}.bn2"))
            out = bn(conv(out, W[f"{p}.conv3.weight"], 1), f"{p}.bn3")
            if i == 0:  # projection shortcut
                x = bn(conv(x, W[f"{p}.downsample.0.weight"], stride), f"{p}.downsample.1")
            x = relu(out + x)
    return x.mean(axis=(2, 3))  # global average pooling -> (N, 2048)


def densenet121_forward(W, x, eps=BN_EPS):
    """DenseNet-121 with torchvision's structure: x (N, 3, H, W) -> (N, classes) logits.

    Each dense layer is BN-ReLU-conv1×1(128)-BN-ReLU-conv3×3(32), its output concatenated to its input; transitions
    are BN-ReLU-conv1×1 (halving channels)-avgpool 2/2; the features end in BN (norm5), then ReLU, global average
    pooling and the classifier.
    """

    def bn_relu(x, prefix):
        return relu(batchnorm(x, W, prefix, eps))

    x = bn_relu(conv2d(x, W["features.conv0.weight"], 2, 3), "features.norm0")
    x = maxpool(x, 3, 2, pad=1)
    for b, layers in enumerate((6, 12, 24, 16), start=1):
        for i in range(1, layers + 1):
            p = f"features.denseblock{b}.denselayer{i}"
            y = conv2d(bn_relu(x, f"{p}.norm1"), W[f"{p}.conv1.weight"])
            y = conv2d(bn_relu(y, f"{p}.norm2"), W[f"{p}.conv2.weight"], pad=1)
            x = np.concatenate([x, y], axis=1)
        if b < 4:
            p = f"features.transition{b}"
            x = avgpool2(conv2d(bn_relu(x, f"{p}.norm"), W[f"{p}.conv.weight"]))
    x = bn_relu(x, "features.norm5").mean(axis=(2, 3))
    return x @ W["classifier.weight"].T + W["classifier.bias"]
