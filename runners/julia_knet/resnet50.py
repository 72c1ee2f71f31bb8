"""Julia 1.5 + Knet 1.4 · resnet50 · the contract side of resnet50.jl: the canonical weights go to Julia as .npy."""

from runners.julia_knet import check_precision, require_knet, run_julia
from shared import canonical


def main(cfg):
    require_knet()
    check_precision(cfg.precision)
    weights, source = canonical.load(cfg.data, "resnet50")  # ImageNet from the `weights` step, else seeded random
    return run_julia(cfg, weights, weights=source)
