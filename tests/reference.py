"""NumPy reference forward passes of the canonical cnn and gru, in the canonical weight layout (float32)."""
import numpy as np


def conv2d_same(x, w, b):
    """x (N, C, H, W), w (O, C, 3, 3), stride 1, 'same' zero padding -> (N, O, H, W)."""
    n, c, h, wd = x.shape
    k = w.shape[2]
    pad = k // 2
    xp = np.pad(x, ((0, 0), (0, 0), (pad, pad), (pad, pad)))
    # im2col: (N, C, k, k, H, W) windows, contracted with the kernel over C, kh, kw
    cols = np.stack([np.stack([xp[:, :, i:i + h, j:j + wd] for j in range(k)], axis=2) for i in range(k)], axis=2)
    return np.einsum("nckluv,ockl->nouv", cols, w, optimize=True) + b[None, :, None, None]


def maxpool2(x):
    n, c, h, w = x.shape
    return x.reshape(n, c, h // 2, 2, w // 2, 2).max(axis=(3, 5))


def relu(x):
    return np.maximum(x, 0)


def cnn_forward(W, x):
    x = relu(conv2d_same(x, W["conv1.weight"], W["conv1.bias"]))
    x = relu(maxpool2(conv2d_same(x, W["conv2.weight"], W["conv2.bias"])))
    x = relu(conv2d_same(x, W["conv3.weight"], W["conv3.bias"]))
    x = relu(maxpool2(conv2d_same(x, W["conv4.weight"], W["conv4.bias"])))
    x = x.reshape(len(x), -1)                                  # C·H·W
    x = relu(x @ W["fc1.weight"].T + W["fc1.bias"])
    return x @ W["fc2.weight"].T + W["fc2.bias"]


def sigmoid(x):
    return 1 / (1 + np.exp(-x))


def gru_forward(W, tokens, reset_after=True):
    """Embedding -> GRU (gates r, z, n) -> last hidden state -> dense. `reset_after=False` is the original GRU
    (reset gate applied to h before the recurrent matmul, as Keras' reset_after=False and some old frameworks)."""
    emb = W["embedding.weight"][tokens]                        # (N, T, E)
    Wi, Wh, bi, bh = W["gru.weight_ih"], W["gru.weight_hh"], W["gru.bias_ih"], W["gru.bias_hh"]
    H = Wh.shape[1]
    h = np.zeros((len(tokens), H), np.float32)
    for t in range(tokens.shape[1]):
        gi = emb[:, t] @ Wi.T + bi
        gh = h @ Wh.T + bh
        r = sigmoid(gi[:, :H] + gh[:, :H])
        z = sigmoid(gi[:, H:2 * H] + gh[:, H:2 * H])
        if reset_after:
            n = np.tanh(gi[:, 2 * H:] + r * gh[:, 2 * H:])
        else:
            n = np.tanh(gi[:, 2 * H:] + (r * h) @ Wh[2 * H:].T + bh[2 * H:])
        h = (1 - z) * n + z * h
    return h @ W["fc.weight"].T + W["fc.bias"]
