"""NumPy reference of one training step of cnn and gru (float64), and of the update rules the runners configure.

Written from the definitions (docs/design.md's table of tasks; the layers of tests/reference.py), not from any
framework: the mean softmax cross-entropy over the batch, its gradient by hand (im2col convolutions, 2×2 max pooling,
the GRU through time), then the canonical update rules:
- SGD with the seed's plain momentum (lesson 8): v = μ·v + g; w -= lr·v (PyTorch's form; equal to v = μ·v − lr·g;
  w += v at a fixed lr, MXNet's, Chainer's, Lasagne's, Caffe2's and Knet's spelling).
- Adam (Kingma & Ba, Algorithm 1): m = β1·m + (1−β1)·g; v = β2·v + (1−β2)·g²; w -= lr·m̂ / (√v̂ + ε) with the bias
  corrections m̂ = m/(1−β1ᵗ), v̂ = v/(1−β2ᵗ). `epsilon_hat=True` is the paper's alternative, ε added before the bias
  correction: w -= lr·√(1−β2ᵗ)/(1−β1ᵗ)·m / (√v + ε) (Keras, TensorFlow, MXNet, Chainer, CNTK).
Dropout is off (the runners' `dropout` switch): the step is deterministic.
"""

import numpy as np
from reference import sigmoid


# ---- cnn ----
def _im2col(x):
    """x (N, C, H, W) -> (N, C·9, H·W): the windows of a 3×3 'same' convolution, ordered as OIHW's (C, kh, kw)."""
    n, c, h, w = x.shape
    xp = np.pad(x, ((0, 0), (0, 0), (1, 1), (1, 1)))
    cols = np.empty((n, c, 3, 3, h, w), x.dtype)
    for i in range(3):
        for j in range(3):
            cols[:, :, i, j] = xp[:, :, i : i + h, j : j + w]
    return cols.reshape(n, c * 9, h * w)


def _col2im(dcols, shape):
    n, c, h, w = shape
    dcols = dcols.reshape(n, c, 3, 3, h, w)
    dxp = np.zeros((n, c, h + 2, w + 2), dcols.dtype)
    for i in range(3):
        for j in range(3):
            dxp[:, :, i : i + h, j : j + w] += dcols[:, :, i, j]
    return dxp[:, :, 1:-1, 1:-1]


def _conv(x, w, b):
    cols = _im2col(x)
    out = np.matmul(w.reshape(len(w), -1), cols) + b[None, :, None]
    return out.reshape(len(x), len(w), *x.shape[2:]), cols


def _conv_back(dout, cols, x_shape, w):
    n, o = dout.shape[:2]
    d = dout.reshape(n, o, -1)
    dw = np.einsum("noh,nkh->ok", d, cols).reshape(w.shape)
    dx = _col2im(np.matmul(w.reshape(o, -1).T, d), x_shape)
    return dx, dw, d.sum(axis=(0, 2))


def _pool(x):
    n, c, h, w = x.shape
    blocks = x.reshape(n, c, h // 2, 2, w // 2, 2)
    out = blocks.max(axis=(3, 5))
    return out, blocks == out[:, :, :, None, :, None]


def _pool_back(dout, mask):
    n, c, h2, _, w2, _ = mask.shape
    return (mask * dout[:, :, :, None, :, None]).reshape(n, c, h2 * 2, w2 * 2)


def softmax_cross_entropy(logits, labels):
    """Mean loss over the batch and its gradient with respect to the logits."""
    z = logits - logits.max(axis=1, keepdims=True)
    p = np.exp(z) / np.exp(z).sum(axis=1, keepdims=True)
    n = len(labels)
    loss = -np.mean(np.log(p[np.arange(n), labels]))
    p[np.arange(n), labels] -= 1
    return loss, p / n


def cnn_loss_grads(W, x, labels):
    """Mean cross-entropy of the canonical CNN (dropout off) and its gradient for every canonical array."""
    W = {k: np.asarray(v, np.float64) for k, v in W.items()}
    x = np.asarray(x, np.float64)
    a1, c1 = _conv(x, W["conv1.weight"], W["conv1.bias"])
    h1 = np.maximum(a1, 0)
    a2, c2 = _conv(h1, W["conv2.weight"], W["conv2.bias"])
    p2, m2 = _pool(a2)
    h2 = np.maximum(p2, 0)
    a3, c3 = _conv(h2, W["conv3.weight"], W["conv3.bias"])
    h3 = np.maximum(a3, 0)
    a4, c4 = _conv(h3, W["conv4.weight"], W["conv4.bias"])
    p4, m4 = _pool(a4)
    h4 = np.maximum(p4, 0)
    f = h4.reshape(len(x), -1)  # C·H·W
    z5 = f @ W["fc1.weight"].T + W["fc1.bias"]
    h5 = np.maximum(z5, 0)
    logits = h5 @ W["fc2.weight"].T + W["fc2.bias"]
    loss, d = softmax_cross_entropy(logits, labels)
    G = {"fc2.weight": d.T @ h5, "fc2.bias": d.sum(0)}
    d = (d @ W["fc2.weight"]) * (z5 > 0)
    G.update({"fc1.weight": d.T @ f, "fc1.bias": d.sum(0)})
    d = (d @ W["fc1.weight"]).reshape(h4.shape) * (p4 > 0)
    d = _pool_back(d, m4)
    d, G["conv4.weight"], G["conv4.bias"] = _conv_back(d, c4, h3.shape, W["conv4.weight"])
    d = d * (a3 > 0)
    d, G["conv3.weight"], G["conv3.bias"] = _conv_back(d, c3, h2.shape, W["conv3.weight"])
    d = _pool_back(d * (p2 > 0), m2)
    d, G["conv2.weight"], G["conv2.bias"] = _conv_back(d, c2, h1.shape, W["conv2.weight"])
    d = d * (a1 > 0)
    _, G["conv1.weight"], G["conv1.bias"] = _conv_back(d, c1, x.shape, W["conv1.weight"])
    return loss, G


# ---- gru ----
def gru_loss_grads(W, tokens, labels, reset_after=True):
    """Mean cross-entropy of embedding → GRU → last hidden state → dense, and its gradient by backpropagation through
    time. `reset_after=False` is the original GRU (reset gate on h before the recurrent matmul)."""
    W = {k: np.asarray(v, np.float64) for k, v in W.items()}
    E, Wi, Wh, bi, bh = (
        W[k] for k in ("embedding.weight", "gru.weight_ih", "gru.weight_hh", "gru.bias_ih", "gru.bias_hh")
    )
    H = Wh.shape[1]
    n, steps = tokens.shape
    h = np.zeros((n, H))
    tape = []
    for t in range(steps):
        x = E[tokens[:, t]]
        gi = x @ Wi.T + bi
        gh = h @ Wh.T + bh
        r = sigmoid(gi[:, :H] + gh[:, :H])
        z = sigmoid(gi[:, H : 2 * H] + gh[:, H : 2 * H])
        if reset_after:
            nn = np.tanh(gi[:, 2 * H :] + r * gh[:, 2 * H :])
        else:
            nn = np.tanh(gi[:, 2 * H :] + (r * h) @ Wh[2 * H :].T + bh[2 * H :])
        tape.append((x, h, gh, r, z, nn))
        h = (1 - z) * nn + z * h
    logits = h @ W["fc.weight"].T + W["fc.bias"]
    loss, d = softmax_cross_entropy(logits, labels)
    G = {"fc.weight": d.T @ h, "fc.bias": d.sum(0), "embedding.weight": np.zeros_like(E)}
    squares = np.zeros_like(E)  # Σ over a row's occurrences of each occurrence's gradient², for `sparse_squares`
    dWi, dWh, dbi, dbh = (np.zeros_like(a) for a in (Wi, Wh, bi, bh))
    dh = d @ W["fc.weight"]
    for t in reversed(range(steps)):
        x, h, gh, r, z, nn = tape[t]
        dn = dh * (1 - z)
        dz = dh * (h - nn)
        dh_next = dh * z
        da_n = dn * (1 - nn**2)
        dai_z = dz * z * (1 - z)
        if reset_after:
            dr = da_n * gh[:, 2 * H :]
            dah_n = da_n * r
            dai_r = dr * r * (1 - r)
            dgh = np.concatenate([dai_r, dai_z, dah_n], axis=1)
            dWh += dgh.T @ h
            dh_next += dgh @ Wh
        else:
            drh = da_n @ Wh[2 * H :]
            dai_r = drh * h * r * (1 - r)
            dgh = np.concatenate([dai_r, dai_z, da_n], axis=1)
            dWh[: 2 * H] += dgh[:, : 2 * H].T @ h
            dWh[2 * H :] += da_n.T @ (r * h)
            dh_next += dgh[:, : 2 * H] @ Wh[: 2 * H] + drh * r
        dgi = np.concatenate([dai_r, dai_z, da_n], axis=1)
        dWi += dgi.T @ x
        dbi += dgi.sum(0)
        dbh += dgh.sum(0)
        np.add.at(G["embedding.weight"], tokens[:, t], dgi @ Wi)
        np.add.at(squares, tokens[:, t], (dgi @ Wi) ** 2)
        dh = dh_next
    G.update({"gru.weight_ih": dWi, "gru.weight_hh": dWh, "gru.bias_ih": dbi, "gru.bias_hh": dbh})
    G[SQUARES] = squares
    return loss, G


SQUARES = "embedding.weight:occurrence squares"


# ---- update rules ----
def sgd_momentum(lr, momentum):
    """The seed's plain momentum as a stateful update: returns step(w, g) -> new w (a dict of arrays)."""
    velocity = {}

    def step(W, G):
        out = {}
        for k in W:
            velocity[k] = momentum * velocity.get(k, 0.0) + G[k]
            out[k] = W[k] - lr * velocity[k]
        return out

    return step


def adam(lr, beta1, beta2, eps, epsilon_hat=False, sparse_squares=False):
    """Adam as a stateful update (ε after the bias correction; `epsilon_hat`: before it). `sparse_squares`: the
    embedding's second moment takes the sum of its per-occurrence gradients' squares instead of the square of their
    sum (what squaring a tf.IndexedSlices gradient element-wise does where a token occurs more than once)."""
    m, v, t = {}, {}, [0]

    def step(W, G):
        t[0] += 1
        out = {}
        for k in W:
            square = G[SQUARES] if sparse_squares and k == "embedding.weight" else G[k] ** 2
            m[k] = beta1 * m.get(k, 0.0) + (1 - beta1) * G[k]
            v[k] = beta2 * v.get(k, 0.0) + (1 - beta2) * square
            if epsilon_hat:
                rate = lr * np.sqrt(1 - beta2 ** t[0]) / (1 - beta1 ** t[0])
                out[k] = W[k] - rate * m[k] / (np.sqrt(v[k]) + eps)
            else:
                out[k] = W[k] - lr * (m[k] / (1 - beta1 ** t[0])) / (np.sqrt(v[k] / (1 - beta2 ** t[0])) + eps)
        return out

    return step


def start(W, one_bias=False):
    """The canonical weights in float64; with `one_bias`, the GRU's two biases summed into `gru.bias_ih`."""
    W = {k: np.asarray(v, np.float64) for k, v in W.items()}
    if one_bias:
        W["gru.bias_ih"], W["gru.bias_hh"] = W["gru.bias_ih"] + W["gru.bias_hh"], np.zeros_like(W["gru.bias_hh"])
    return W


def train(task, W, x, labels, update, steps, one_bias=False, **variant):
    """`steps` steps on the one batch: (the loss before each step, the weights after each step). `one_bias`: a GRU
    with one bias per gate (b = b_ih + b_hh, trained as one array: `gru.bias_ih`, with `gru.bias_hh` held at zero)."""
    loss_grads = cnn_loss_grads if task == "cnn" else gru_loss_grads
    W = start(W, one_bias)
    losses, after = [], []
    for _ in range(steps):
        loss, G = loss_grads(W, x, labels, **variant)
        if one_bias:
            G["gru.bias_hh"] = np.zeros_like(G["gru.bias_hh"])
        W = update(W, G)
        losses.append(loss)
        after.append(W)
    return losses, after
