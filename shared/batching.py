"""One seeded shuffle per epoch and one batching, shared by every framework, so all see the same data order.

Training drops the last partial batch (static shapes for cuDNN autotune and graph compilers, as the seed notebooks'
generators did); evaluation never does: every test sample is scored exactly once.
"""

from typing import Any, Iterator

import numpy as np

from shared import params


def epoch_order(n: int, epoch: int, seed: int = params.SEED) -> Any:
    """The permutation of `n` samples for `epoch` (0-based): the same in every framework and on every rank."""
    return np.random.default_rng([seed, epoch]).permutation(n)


def train_batches(
    n: int, batch_size: int, epoch: int, rank: int = 0, world: int = 1, seed: int = params.SEED
) -> Iterator[Any]:
    """Index arrays of one training epoch. With `world` data-parallel ranks each global batch of
    `batch_size * world` samples is cut into `world` equal slices and rank `rank` gets its own."""
    order = epoch_order(n, epoch, seed)
    global_batch = batch_size * world
    for start in range(0, n - global_batch + 1, global_batch):
        yield order[start + rank * batch_size : start + (rank + 1) * batch_size]


def eval_batches(n: int, batch_size: int) -> Iterator[Any]:
    """Index arrays covering 0..n-1 in order, the last batch possibly smaller."""
    for start in range(0, n, batch_size):
        yield np.arange(start, min(start + batch_size, n))


def steps_per_epoch(n: int, batch_size: int, world: int = 1) -> int:
    return n // (batch_size * world)
