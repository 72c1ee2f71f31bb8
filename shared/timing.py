"""Timing discipline (STYLE.md: pyperf, airbench): warm-up apart, raw values kept, spread reported and flagged.

Every clock edge calls the framework's own barrier (`torch.cuda.synchronize`, `block_until_ready`, `nd.waitall`, …)
so that asynchronous GPU work is inside the interval it belongs to.
"""
import statistics
import time
from contextlib import contextmanager

UNSTABLE_SPREAD = 0.10  # (max - min) / median above this marks a timing as unstable; it is flagged, never dropped


def no_barrier():
    """The barrier of a synchronous device (the CPU)."""


@contextmanager
def stopwatch(barrier=no_barrier):
    """`with stopwatch(sync) as t: ...` then `t()` gives the seconds, barriers at both edges."""
    barrier()
    start = time.perf_counter()
    elapsed = []
    yield lambda: elapsed[0]
    barrier()
    elapsed.append(time.perf_counter() - start)


def summarize(values, warmup=None):
    """The `timing` block of a result record from raw seconds."""
    values = [float(v) for v in values]
    median = statistics.median(values)
    spread = (max(values) - min(values)) / median if median > 0 else 0.0
    return {
        "warmup": warmup,
        "repeats": len(values),
        "values": values,
        "median": median,
        "min": min(values),
        "max": max(values),
        "spread": spread,
        "unstable": len(values) > 1 and spread > UNSTABLE_SPREAD,
    }


def repeat(fn, *, repeats, warmup=1, barrier=no_barrier):
    """Call `fn` `warmup` times untimed (compile, autotune, caches), then `repeats` times timed; return the summary."""
    with stopwatch(barrier) as warm:
        for _ in range(warmup):
            fn()
    values = []
    for _ in range(repeats):
        with stopwatch(barrier) as t:
            fn()
        values.append(t())
    return summarize(values, warmup=warm() if warmup else None)


def timed_epochs(epochs, epoch_batches, step, barrier=no_barrier):
    """The training clock: run `step(batch)` for every batch of `epoch_batches(epoch)`, one timed interval per epoch.

    The very first step (compile, autotune, lazy allocation) is also timed on its own and returned as the warm-up;
    it still counts towards its epoch, as it would for a user. Returns (epoch_seconds, warmup_seconds, last output).
    """
    epoch_seconds, warmup, out = [], None, None
    for epoch in range(epochs):
        with stopwatch(barrier) as epoch_time:
            for i, batch in enumerate(epoch_batches(epoch)):
                if warmup is None:
                    with stopwatch(barrier) as first:
                        out = step(batch)
                    warmup = first()
                else:
                    out = step(batch)
        epoch_seconds.append(epoch_time())
    return epoch_seconds, warmup, out


def steady_state_seconds(epoch_seconds, warmup=None, steps=None):
    """The training time at the steady rate, i.e. without compile, trace and autotune costs: the median epoch after
    the first, times the number of epochs; with one epoch, the epoch minus its first step, scaled back up to `steps`
    steps. None where neither can be known (one epoch and no separately timed first step)."""
    if len(epoch_seconds) > 1:
        return float(statistics.median(epoch_seconds[1:]) * len(epoch_seconds))
    if warmup is not None and steps and steps > 1:
        return float((epoch_seconds[0] - warmup) * steps / (steps - 1))
    return None


def train_metrics(epoch_seconds, samples_per_epoch, *, warmup=None, steps=None, **extra):
    """The `metrics` block of a training task: the time a user waits (`train_seconds`, compile and first step
    included), the steady-state time beside it, throughput, and whatever the task adds (accuracy, auc, …)."""
    train_seconds = float(sum(epoch_seconds))
    return {"train_seconds": train_seconds, "epoch_seconds": [float(s) for s in epoch_seconds],
            "steady_state_seconds": steady_state_seconds(epoch_seconds, warmup, steps),
            "warmup_seconds": warmup,
            "samples_per_second": samples_per_epoch * len(epoch_seconds) / train_seconds, **extra}


def extraction_metrics(timing, images, batch_size, image_size, **extra):
    """The `metrics` block of feature extraction: the median pass over `images` images, per 1,000 images (the seed's
    unit) and per second, plus what the task adds (weights, …)."""
    return {"seconds_per_1000_images": timing["median"] / images * 1000, "samples_per_second": images / timing["median"],
            "images": images, "image_size": image_size, "batch_size": batch_size, **extra}
