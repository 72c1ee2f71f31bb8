"""Timing discipline (docs/style.md: pyperf, airbench, asv): warm-up apart, every sample kept, spread as IQR, noise
flagged.

Every clock edge calls the framework's own barrier (`torch.cuda.synchronize`, `block_until_ready`, `nd.waitall`, …)
so that asynchronous GPU work is inside the interval it belongs to.

A number is reported with its samples: training is timed in windows of WINDOW_STEPS steps after the first step (one
barrier per window edge, never per step; DenseNet-121's long steps are windows of one), feature extraction in passes.
Both warm up until two consecutive windows or passes agree (at most WARMUP_CAP of them), and only what follows is a
sample. The steady state is the median sample; the spread is IQR / median over those post-warm-up samples, and with
fewer than MIN_SAMPLES samples there is no spread estimate (None, never 0).

On a CPU, where the harness sets `between` (shared/runner.py), the cores' distance is measured at every window edge,
outside the clock (shared/placement.py): `round_trips_ns` in the timing block, one value per edge of the windows it
lists, so that each sample says whether the two cores were near or apart while it was timed (scripts/results/verify.py
compares like with like).
"""

import statistics
import time
from contextlib import contextmanager
from typing import Any, Callable, Dict, Iterable, Iterator, List, Mapping, Optional, Sequence, Tuple

import numpy as np

from shared.devsync import device_sync
from shared.params import PASS_UNIT, STEP_UNIT

WINDOW_STEPS = 5  # training steps per timed window: one sample, a barrier at each edge …
TASK_WINDOW_STEPS = {"densenet121": 1}  # … but one step for DenseNet-121: its steps are long (a barrier costs little
#                                        against them) and few, and a demo cell needs five samples after its warm-up
MIN_SAMPLES = 5  # fewer samples than this give no spread estimate
UNSTABLE_SPREAD = 0.10  # IQR / median above this marks a timing as noisy (†); it is flagged, never dropped
WARMUP_AGREEMENT = 0.10  # warm-up lasts until two consecutive passes (training: windows) differ by less than this …
WARMUP_CAP = 5  # … or this many have run (then `warm` says it did not settle)
LEAK_SECONDS = 1e-3  # a CUDA device synchronize right after the barrier that takes longer than this …
LEAK_SHARE = 0.02  # … and than this share of the interval found work the barrier did not wait for

_audit = []  # type: list  # (interval, seconds a device synchronize took right after its closing barrier)
between: Any = None  # the cores' distance now (ns, or None), set by the harness for a CPU cell …
_edges = []  # type: list  # … and what it measured at each window edge


def edge() -> float:
    """At a window edge, outside the clock: the cores' distance, kept for the timing block; the seconds it took."""
    if between is None:
        return 0.0
    start = time.perf_counter()
    _edges.append(between())
    return time.perf_counter() - start


def window_steps(task: str) -> int:
    """The training steps in one timed window of `task` (WINDOW_STEPS, or the task's own)."""
    return TASK_WINDOW_STEPS.get(task, WINDOW_STEPS)


def no_barrier() -> None:
    """The barrier of a synchronous device (the CPU)."""


@contextmanager
def stopwatch(barrier: Callable[[], Any] = no_barrier) -> Iterator[Callable[[], float]]:
    """`with stopwatch(sync) as t: ...` then `t()` gives the seconds, barriers at both edges. On a GPU the closing
    barrier is audited: a CUDA device synchronize right after it (outside the interval) must find nothing to wait
    for, else the barrier returned early and the interval is too short (`barrier_audit` in the timing block)."""
    barrier()
    start = time.perf_counter()
    elapsed: List[float] = []
    yield lambda: elapsed[0]
    barrier()
    elapsed.append(time.perf_counter() - start)
    sync = device_sync()
    if sync is not None:
        _audit.append((elapsed[0], sync()))


def barrier_audit() -> Optional[Dict[str, Any]]:
    """The timing block's check of the barrier: at how many clock edges a device synchronize followed it, the
    longest it took, and how many found work left (leaks); None where no CUDA context exists (the CPU)."""
    if not _audit:
        return None
    after = [seconds for _, seconds in _audit]
    leaks = sum(1 for interval, seconds in _audit if seconds > max(LEAK_SECONDS, LEAK_SHARE * interval))
    return {
        "checks": len(_audit),
        "max_after_seconds": max(after),
        "median_after_seconds": float(statistics.median(after)),
        "leaks": leaks,
    }


def round_trips() -> Dict[str, List[Any]]:
    """{"round_trips_ns": one per window edge} where they were measured (a CPU cell), else nothing."""
    return {"round_trips_ns": list(_edges)} if _edges else {}


def summarize(
    values: Iterable[Any], warmup: Optional[float] = None, unit: str = "seconds", warm: Optional[bool] = None
) -> Dict[str, Any]:
    """The `timing` block of a result record from post-warm-up samples: every value, median, quartiles, and the
    spread (IQR / median) where there are MIN_SAMPLES or more, else None. `warmup` is the warm-up's seconds, `warm`
    whether the warm-up settled, `unit` what one value measures."""
    values = [float(v) for v in values]
    block = {
        "warmup": warmup,
        "repeats": len(values),
        "values": values,
        "unit": unit,
        "warm": warm,
        "median": None,
        "min": None,
        "max": None,
        "q1": None,
        "q3": None,
        "spread": None,
        "unstable": None,
        "barrier_audit": barrier_audit(),
        **round_trips(),
    }
    if not values:
        return block
    median = float(statistics.median(values))
    q1, q3 = (float(q) for q in np.percentile(values, [25, 75]))  # linear interpolation (Hyndman-Fan 7, as Julia)
    spread = (q3 - q1) / median if len(values) >= MIN_SAMPLES and median > 0 else None
    block.update(
        median=median,
        min=min(values),
        max=max(values),
        q1=q1,
        q3=q3,
        spread=spread,
        unstable=None if spread is None else spread > UNSTABLE_SPREAD,
    )
    return block


def repeat(fn: Callable[[], Any], *, repeats: int, barrier: Callable[[], Any] = no_barrier) -> Dict[str, Any]:
    """Feature extraction's clock: call `fn` untimed until two consecutive calls agree within WARMUP_AGREEMENT
    (compile, autotune, caches; at most WARMUP_CAP calls), then max(`repeats`, MIN_SAMPLES) times timed; the summary,
    whose `warmup` is the warm-up's seconds and `warm` whether it settled."""
    warm_times: List[float] = []
    while len(warm_times) < WARMUP_CAP:
        with stopwatch(barrier) as t:
            fn()
        warm_times.append(t())
        if len(warm_times) >= 2 and agree(warm_times[-2], warm_times[-1]):
            break
    settled = len(warm_times) >= 2 and agree(warm_times[-2], warm_times[-1])
    values = []
    edge()
    for _ in range(max(repeats, MIN_SAMPLES)):
        with stopwatch(barrier) as t:
            fn()
        values.append(t())
        edge()
    return summarize(values, warmup=sum(warm_times), unit=PASS_UNIT, warm=settled)


def timed_epochs(
    epochs: int,
    epoch_batches: Callable[[int], Iterable[Any]],
    step: Callable[[Any], Any],
    barrier: Callable[[], Any] = no_barrier,
    window: int = WINDOW_STEPS,
    outputs: Optional[List[Any]] = None,
    steps_of: Optional[Callable[[Any], int]] = None,
) -> Tuple[List[float], Optional[float], Any, List[float]]:
    """The training clock: run `step(batch)` for every batch of `epoch_batches(epoch)`, one timed interval per epoch
    and, inside it, one sample per `window` steps after the very first step (barriers at the window edges). Every
    step's output (its loss, left on the device: no host sync) is appended to the list `outputs` where one is given.

    The very first step (compile, autotune, lazy allocation) is also timed on its own and returned as the warm-up;
    it still counts towards its epoch, as it would for a user. A window never spans two epochs (the shuffle between
    them is not a step); the steps left at an epoch's end count in its time but give no sample. Returns
    (epoch_seconds, warmup_seconds, last output, windows: seconds per step of each full window).

    `steps_of(batch)`: how many training steps one call of `step` takes (default 1), for a runner that dispatches
    several steps at once (a tuned cell's chunk): a window closes at the first call that fills it and is divided by
    the steps it holds; the first call is the warm-up, however many steps it takes."""
    epoch_seconds, warmup, out, windows = [], None, None, []
    for epoch in range(epochs):
        probing = 0.0  # seconds of the epoch spent at window edges (edge())
        with stopwatch(barrier) as epoch_time:
            in_window, window_start = 0, time.perf_counter()  # a window holds its batches' gathering too
            for batch in epoch_batches(epoch):
                if warmup is None:
                    with stopwatch(barrier) as first:
                        out = step(batch)
                    warmup = first()
                    probing += edge()
                    window_start = time.perf_counter()
                    if outputs is not None:
                        outputs.append(out)
                    continue
                out = step(batch)
                if outputs is not None:
                    outputs.append(out)
                in_window += steps_of(batch) if steps_of else 1
                if in_window >= window:
                    barrier()
                    windows.append((time.perf_counter() - window_start) / in_window)
                    probing += edge()
                    in_window, window_start = 0, time.perf_counter()
        epoch_seconds.append(epoch_time() - probing)
    return epoch_seconds, warmup, out, windows


class InputWait:
    """Time the training loop spends blocked waiting for its next batch: wrap each epoch's batches, `wait(batches)`,
    and every `iter()`/`next()` on them is timed (the batch a background worker has ready returns at once; one it has
    not is waited for). `fraction(seconds)` is that time over the timed training: 0 = the input always kept up. The
    same measure in every DenseNet-121 runner (README, "the input rule"); it reads a clock, it adds no device sync."""

    def __init__(self) -> None:
        self.seconds, self.batches = 0.0, 0

    def __call__(self, batches):
        start = time.perf_counter()
        it = iter(batches)
        while True:
            try:
                batch = next(it)
            except StopIteration:
                self.seconds += time.perf_counter() - start
                return
            self.seconds += time.perf_counter() - start
            self.batches += 1
            yield batch
            start = time.perf_counter()

    def fraction(self, seconds: float) -> Optional[float]:
        """The waited share of `seconds` (the timed training: sum of the epochs)."""
        return self.seconds / seconds if seconds > 0 else None


def agree(earlier: float, later: float) -> bool:
    """Whether two consecutive warm-up windows or passes agree (WARMUP_AGREEMENT): the warm-up is over."""
    return abs(later - earlier) <= WARMUP_AGREEMENT * earlier


def warm_windows(windows: Sequence[float]) -> Tuple[int, bool]:
    """How many of a training run's windows are warm-up, and whether it settled: every window up to and including the
    first of two consecutive windows that agree, at most WARMUP_CAP (then it did not settle). The first step is
    already apart (timed_epochs); this catches what settles more slowly (allocator growth, caches, a JIT's later
    specializations), as feature extraction's passes do."""
    for i in range(1, min(len(windows), WARMUP_CAP)):
        if agree(windows[i - 1], windows[i]):
            return i + 1, True
    return min(len(windows), WARMUP_CAP), False


def samples_of(windows: Sequence[float]) -> List[float]:
    """The windows that are samples: those after the warm-up (warm_windows)."""
    return list(windows[warm_windows(windows)[0] :])


def steady_state_seconds(
    epoch_seconds: Sequence[float],
    warmup: Optional[float] = None,
    steps: Optional[int] = None,
    windows: Optional[Sequence[float]] = None,
) -> Optional[float]:
    """The training time at the steady rate, i.e. without compile, trace and autotune costs: the median sample's
    seconds per step (`windows`: the samples, after the warm-up) times every step of the run; without a full window,
    the epochs after the first (their median times the number of epochs), or the one epoch minus its first step scaled
    back up to `steps` steps. None where
    none of these can be known."""
    if windows and steps:
        return float(statistics.median(windows) * steps * len(epoch_seconds))
    if len(epoch_seconds) > 1:
        return float(statistics.median(epoch_seconds[1:]) * len(epoch_seconds))
    if warmup is not None and steps and steps > 1:
        return float((epoch_seconds[0] - warmup) * steps / (steps - 1))
    return None


def train_metrics(
    epoch_seconds: Sequence[float],
    samples_per_epoch: int,
    *,
    warmup: Optional[float] = None,
    steps: Optional[int] = None,
    windows: Optional[Sequence[float]] = None,
    **extra: Any,
) -> Dict[str, Any]:
    """The `metrics` block of a training task: the time a user waits (`train_seconds`, compile and first step
    included), the steady-state time beside it, throughput, and whatever the task adds (accuracy, auc, …)."""
    train_seconds = float(sum(epoch_seconds))
    steady = steady_state_seconds(epoch_seconds, warmup, steps, samples_of(windows or []))
    samples = samples_per_epoch * len(epoch_seconds)
    return {
        "train_seconds": train_seconds,
        "epoch_seconds": [float(s) for s in epoch_seconds],
        "steady_state_seconds": steady,
        "warmup_seconds": warmup,
        "samples_per_second": samples / train_seconds,
        "steady_samples_per_second": samples / steady if steady else None,
        **extra,
    }


def train_timing(
    windows: Sequence[float], warmup: Optional[float] = None, window: int = WINDOW_STEPS
) -> Dict[str, Any]:
    """The `timing` block of a training task: the seconds per step of the windows (`window` steps each) after the
    warm-up as its samples, the warm-up windows beside them, and whether the warm-up settled."""
    count, settled = warm_windows(windows)
    return {
        **summarize(windows[count:], warmup=warmup, unit=STEP_UNIT, warm=settled),
        "warmup_windows": [float(w) for w in windows[:count]],
        "window_steps": window,
    }


def extraction_metrics(
    timing: Mapping[str, Any], images: int, batch_size: int, image_size: int, **extra: Any
) -> Dict[str, Any]:
    """The `metrics` block of feature extraction: the median pass over `images` images, per 1,000 images (the seed's
    unit) and per second, plus what the task adds (weights, …)."""
    return {
        "seconds_per_1000_images": timing["median"] / images * 1000,
        "samples_per_second": images / timing["median"],
        "images": images,
        "image_size": image_size,
        "batch_size": batch_size,
        **extra,
    }
