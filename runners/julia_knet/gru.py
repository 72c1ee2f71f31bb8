"""Julia 1.5 + Knet 1.4 · gru · the contract side of gru.jl, where the model, training step and evaluation are."""

from runners.julia_knet import check_precision, epoch_orders, require_knet, run_julia
from shared import canonical
from shared.datasets import load_imdb


def main(cfg):
    require_knet()
    check_precision(cfg.precision)
    p = cfg.params
    x_train, y_train, x_test, y_test = load_imdb(
        cfg.data, p["max_features"], p["maxlen"], p.get("train_samples"), p.get("test_samples")
    )
    return run_julia(
        cfg,
        {
            "x_train": x_train,
            "y_train": y_train,
            "x_test": x_test,
            "y_test": y_test,
            "orders": epoch_orders(len(x_train), p["batch_size"], p["epochs"]),
            **canonical.init_weights("gru"),
        },
    )  # the shared start, read by gru.jl
