"""Canonical weights: one documented layout that every framework's cnn and gru load (DESIGN.md, "Equivalence").

Layout: conv kernels OIHW, dense (out, in), flatten order C·H·W; GRU gates stacked (r, z, n) along the first axis,
input and hidden biases kept apart (the cuDNN formulation: n = tanh(W_n x + b_in + r * (U_n h + b_hn))).
A runner converts from this layout to its framework's (e.g. Keras: kernels HWIO, dense (in, out), gates z, r, h).
"""
import numpy as np

SHAPES = {
    "cnn": {
        "conv1.weight": (50, 3, 3, 3), "conv1.bias": (50,),
        "conv2.weight": (50, 50, 3, 3), "conv2.bias": (50,),
        "conv3.weight": (100, 50, 3, 3), "conv3.bias": (100,),
        "conv4.weight": (100, 100, 3, 3), "conv4.bias": (100,),
        "fc1.weight": (512, 6400), "fc1.bias": (512,),
        "fc2.weight": (10, 512), "fc2.bias": (10,),
    },
    "gru": {
        "embedding.weight": (30_000, 125),
        "gru.weight_ih": (300, 125), "gru.weight_hh": (300, 100),  # rows: r, z, n — 100 each
        "gru.bias_ih": (300,), "gru.bias_hh": (300,),
        "fc.weight": (2, 100), "fc.bias": (2,),
    },
}


def random_weights(task, seed=0):
    """Random float32 weights in the canonical layout, scaled so activations stay in a sensible range."""
    rng = np.random.default_rng(seed)
    out = {}
    for name, shape in SHAPES[task].items():
        fan_in = int(np.prod(shape[1:])) if len(shape) > 1 else 1
        scale = 0.5 if name == "embedding.weight" else (1.0 / np.sqrt(fan_in) if len(shape) > 1 else 0.1)
        out[name] = (rng.standard_normal(shape) * scale).astype(np.float32)
    return out


def count(task):
    return sum(int(np.prod(s)) for s in SHAPES[task].values())
