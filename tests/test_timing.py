"""The clock every runner uses (shared/timing.py): samples after the warm-up, spread as IQR, no spread from too few
samples, windows that never hold the first step. A fake clock: no test here depends on this machine's speed."""

import pytest

from shared import timing

pytestmark = pytest.mark.unit


class FakeClock:
    """time.perf_counter for shared.timing: advances only when a step runs (by that step's cost) and counts barriers."""

    def __init__(self, monkeypatch):
        self.now, self.barriers = 0.0, 0
        monkeypatch.setattr(timing.time, "perf_counter", lambda: self.now)

    def barrier(self):
        self.barriers += 1

    def step(self, seconds):
        def run(batch):
            self.now += seconds(batch) if callable(seconds) else seconds
            return batch

        return run


def test_training_windows_exclude_the_first_step_and_never_span_epochs(monkeypatch):
    clock = FakeClock(monkeypatch)
    cost = lambda batch: 10.0 if batch == (0, 0) else 0.5  # the first step compiles
    epochs, warmup, out, windows = timing.timed_epochs(
        2, lambda epoch: [(epoch, i) for i in range(13)], clock.step(cost), clock.barrier
    )
    assert warmup == 10.0 and out == (1, 12)
    assert epochs == [10.0 + 12 * 0.5, 13 * 0.5]  # the first step counts in its epoch, as a user waits
    # epoch 0: 12 steps after the first → 2 windows of 5 (2 left over); epoch 1: 13 steps → 2 windows (3 left over)
    assert windows == [0.5] * 4
    # barriers at the epoch edges (2 each), around the first step (2) and at each window's end (4): never per step
    assert clock.barriers == 2 * 2 + 2 + 4


def test_the_cores_distance_is_measured_at_every_window_edge_outside_every_clock(monkeypatch):
    """On a CPU the harness sets `timing.between` (shared/placement.py's probe): it runs after the first step and
    after each window, one edge per window plus the one before the first, and its time (here 3 s a probe) shows in no
    window, no epoch and no warm-up; the training and the extraction timing blocks list every edge."""
    clock = FakeClock(monkeypatch)
    trips = iter(range(100, 200))

    def probe():
        clock.now += 3.0
        return float(next(trips))

    monkeypatch.setattr(timing, "between", probe)
    monkeypatch.setattr(timing, "_edges", [])
    cost = lambda batch: 10.0 if batch == (0, 0) else 0.5
    epochs, warmup, _, windows = timing.timed_epochs(
        2, lambda epoch: [(epoch, i) for i in range(13)], clock.step(cost), clock.barrier
    )
    assert warmup == 10.0 and windows == [0.5] * 4 and epochs == [10.0 + 12 * 0.5, 13 * 0.5]
    block = timing.train_timing(windows, warmup)
    assert block["round_trips_ns"] == [100.0, 101.0, 102.0, 103.0, 104.0]  # after the first step, after each window
    monkeypatch.setattr(timing, "_edges", [])
    costs = iter([2.0] * 10)
    block = timing.repeat(lambda: clock.step(lambda _: next(costs))(None), repeats=5, barrier=clock.barrier)
    assert block["values"] == [2.0] * 5 and block["round_trips_ns"] == [105.0 + i for i in range(6)]
    monkeypatch.setattr(timing, "between", None)
    monkeypatch.setattr(timing, "_edges", [])
    assert "round_trips_ns" not in timing.summarize([1.0] * 5)  # not measured: no key


def test_a_chunk_of_steps_fills_its_window_and_the_steps_left_over_give_no_sample(monkeypatch):
    """A tuned cell's step runs a chunk of five steps per call (runners.jax.multi_step): the first chunk is the
    warm-up, each further chunk closes a window divided by the five steps it holds, and the single steps an epoch
    leaves over count in its time but give no sample (and no barrier)."""
    clock = FakeClock(monkeypatch)
    chunks = [("chunk", 5)] * 4 + [("step", 1)] * 3  # 23 steps: 4 chunks, then 3 one by one
    cost = lambda batch: 2.5 if batch[0] == "chunk" else 0.5
    epochs, warmup, out, windows = timing.timed_epochs(
        1, lambda epoch: chunks, clock.step(cost), clock.barrier, steps_of=lambda batch: batch[1]
    )
    assert warmup == 2.5 and windows == [0.5] * 3 and epochs == [4 * 2.5 + 3 * 0.5]
    assert clock.barriers == 2 + 2 + 3


def test_the_steady_state_is_the_median_window_over_every_step():
    windows = [0.4, 0.5, 0.6, 0.5, 0.9]  # min 0.4, mean 0.58, median 0.5: only the median
    assert timing.steady_state_seconds([16.0, 6.5], warmup=10.0, steps=13, windows=windows) == 0.5 * 13 * 2
    # without a full window: the epochs after the first, or the one epoch less its first step
    assert timing.steady_state_seconds([16.0, 6.5, 7.5], steps=13) == 7.0 * 3
    assert timing.steady_state_seconds([16.0], warmup=10.0, steps=13) == pytest.approx(6.0 * 13 / 12)
    assert timing.steady_state_seconds([16.0]) is None


def test_a_summary_has_a_spread_only_from_enough_samples():
    few = timing.summarize([1.0, 2.0, 3.0, 4.0])
    assert few["repeats"] == 4 and few["median"] == 2.5 and few["spread"] is None and few["unstable"] is None
    block = timing.summarize([1.0, 1.0, 1.1, 1.2, 2.0], unit="seconds per step")
    assert (block["q1"], block["median"], block["q3"]) == (1.0, 1.1, 1.2)
    assert block["spread"] == pytest.approx(0.2 / 1.1) and block["unstable"] is True
    assert timing.summarize([1.0] * 5)["spread"] == 0.0  # measured as zero, not unknown
    assert timing.summarize([])["median"] is None  # a cell too short for one window


def test_feature_extraction_warms_up_until_two_passes_agree(monkeypatch):
    clock = FakeClock(monkeypatch)
    costs = iter([9.0, 3.0, 2.05, 2.0] + [2.0] * 10)
    block = timing.repeat(lambda: clock.step(lambda _: next(costs))(None), repeats=3, barrier=clock.barrier)
    assert block["warmup"] == pytest.approx(9.0 + 3.0 + 2.05 + 2.0) and block["warm"] is True
    assert block["repeats"] == timing.MIN_SAMPLES and block["values"] == [2.0] * 5  # 3 asked, 5 needed for a spread
    assert block["unit"] == "seconds per pass"


def test_a_warm_up_that_never_settles_stops_at_the_cap_and_says_so(monkeypatch):
    clock = FakeClock(monkeypatch)
    costs = iter([1.0, 2.0, 1.0, 2.0, 1.0] + [1.5] * 8)
    block = timing.repeat(lambda: clock.step(lambda _: next(costs))(None), repeats=8)
    assert block["warm"] is False and block["warmup"] == 7.0 and block["repeats"] == 8


class SlowBatches:
    """A fake input pipeline on the fake clock: iter() costs `start`, each next() `costs[i]` (a worker not yet done)."""

    def __init__(self, clock, start, costs):
        self.clock, self.start, self.costs = clock, start, costs

    def __iter__(self):
        self.clock.now += self.start
        for i, cost in enumerate(self.costs):
            self.clock.now += cost
            yield i


def test_input_wait_counts_only_the_time_blocked_for_the_next_batch(monkeypatch):
    clock = FakeClock(monkeypatch)
    wait = timing.InputWait()
    step = clock.step(1.0)  # each training step: 1 s the input can overlap
    epochs, _, _, _ = timing.timed_epochs(
        2, lambda epoch: wait(SlowBatches(clock, 0.5, [2.0, 0.0, 0.25, 0.0])), step, clock.barrier
    )
    # per epoch: iter 0.5 + next 2.25, steps 4 × 1.0; the step time is never counted as waiting
    assert wait.seconds == 2 * 2.75 and wait.batches == 8
    assert sum(epochs) == 2 * (2.75 + 4.0)
    assert wait.fraction(sum(epochs)) == 2.75 / 6.75
    assert timing.InputWait().fraction(0.0) is None


def test_input_wait_is_near_one_for_a_slow_source_and_near_zero_for_a_ready_one():
    import time

    def slow():
        for i in range(4):
            time.sleep(0.05)  # the loop does nothing but wait
            yield i

    starved = timing.InputWait()
    start = time.perf_counter()
    assert list(starved(slow())) == [0, 1, 2, 3]
    assert starved.fraction(time.perf_counter() - start) > 0.9
    fed = timing.InputWait()
    start = time.perf_counter()
    for _ in fed(range(4)):  # batches ready; the steps take the time
        time.sleep(0.05)
    assert fed.fraction(time.perf_counter() - start) < 0.1


# ---------------------------------------------------------------- every threshold, pinned on both sides


def test_the_spread_marks_noise_above_ten_percent_and_not_at_it():
    assert timing.UNSTABLE_SPREAD == 0.10
    calm = timing.summarize([1.0, 1.0, 1.0, 1.099, 1.099])  # q1 1.0, q3 1.099, median 1.0: 9.9 %
    noisy = timing.summarize([1.0, 1.0, 1.0, 1.101, 1.101])  # 10.1 %
    assert calm["spread"] == pytest.approx(0.099) and calm["unstable"] is False
    assert noisy["spread"] == pytest.approx(0.101) and noisy["unstable"] is True


def test_five_samples_give_a_spread_and_four_do_not():
    assert timing.MIN_SAMPLES == 5
    assert timing.summarize([1.0, 1.1, 1.2, 1.3])["spread"] is None
    assert timing.summarize([1.0, 1.1, 1.2, 1.3, 1.4])["spread"] is not None


@pytest.mark.parametrize("second, settled_after", [(2.19, 2), (2.21, 3)])
def test_two_passes_agree_within_ten_percent(monkeypatch, second, settled_after):
    """2.0 then 2.19 agree (9.5 %); 2.0 then 2.21 do not (10.5 %), so a third pass is needed."""
    clock = FakeClock(monkeypatch)
    costs = iter([2.0, second, second] + [2.0] * 10)
    block = timing.repeat(lambda: clock.step(lambda _: next(costs))(None), repeats=5)
    assert block["warm"] is True and block["warmup"] == pytest.approx(2.0 + second * (settled_after - 1))


def test_windows_hold_five_steps_each_and_densenets_one():
    assert timing.WINDOW_STEPS == 5 and timing.window_steps("cnn") == timing.window_steps("gru") == 5
    assert timing.window_steps("densenet121") == 1
    assert timing.train_timing([0.1] * 7)["window_steps"] == 5
    assert timing.train_timing([0.1] * 7, window=1)["window_steps"] == 1


def test_training_warms_up_until_two_windows_agree_and_only_later_windows_are_samples():
    """The first step is apart already; the windows after it that still move (allocator growth, caches, a JIT's later
    specializations) are warm-up too, up to and including the first two that agree within ten percent."""
    windows = [0.9, 0.7, 0.52, 0.5, 0.4, 0.5, 0.6, 0.5, 0.45]
    assert timing.warm_windows(windows) == (4, True)
    block = timing.train_timing(windows, warmup=3.0)
    assert block["warmup_windows"] == [0.9, 0.7, 0.52, 0.5] and block["warm"] is True
    assert block["values"] == [0.4, 0.5, 0.6, 0.5, 0.45] and block["median"] == 0.5 and block["repeats"] == 5
    assert timing.samples_of(windows) == block["values"]
    assert timing.warm_windows([0.5, 0.5, 0.5]) == (2, True)  # two that agree at once: both are warm-up


@pytest.mark.parametrize("second, warm", [(0.549, 2), (0.551, 5)])
def test_two_windows_agree_within_ten_percent(second, warm):
    assert timing.warm_windows([0.5, second, 0.7, 0.9, 1.2, 0.5, 0.5])[0] == warm


def test_a_training_warm_up_that_never_settles_stops_at_the_cap_and_says_so():
    windows = [1.0, 2.0, 1.0, 2.0, 1.0, 2.0, 1.0, 2.0]
    assert timing.WARMUP_CAP == 5 and timing.warm_windows(windows) == (5, False)
    block = timing.train_timing(windows)
    assert block["warm"] is False and block["values"] == [2.0, 1.0, 2.0] and len(block["warmup_windows"]) == 5
    assert timing.warm_windows([1.0, 2.0]) == (2, False) and timing.train_timing([1.0, 2.0])["values"] == []
    assert timing.warm_windows([]) == (0, False)
    # no sample left: the steady state falls back to the epochs, as for a cell too short for one window
    assert timing.train_metrics([16.0], 100, warmup=10.0, steps=13, windows=[1.0, 2.0])[
        "steady_state_seconds"
    ] == pytest.approx(6.0 * 13 / 12)


def test_feature_extraction_figures_come_from_the_median_pass():
    block = {"median": 2.0, "min": 1.0, "max": 4.0}
    metrics = timing.extraction_metrics(block, images=8, batch_size=8, image_size=224)
    assert metrics["seconds_per_1000_images"] == 250.0 and metrics["samples_per_second"] == 4.0


def test_train_metrics_publish_what_the_samples_say():
    windows = [0.9, 0.52, 0.5, 0.4, 0.5, 0.6, 0.5, 0.9]  # warm-up: 0.9, then 0.52 and 0.5 agree; five samples
    metrics = timing.train_metrics([20.0, 10.0], 100, warmup=5.0, steps=10, windows=windows)
    assert metrics["train_seconds"] == 30.0 and metrics["steady_state_seconds"] == 0.5 * 10 * 2
    assert metrics["samples_per_second"] == 200 / 30.0 and metrics["steady_samples_per_second"] == 200 / 10.0


@pytest.mark.parametrize(
    "interval, after, leak",
    [
        (0.01, 0.0011, True),
        (0.01, 0.0009, False),  # short intervals: the 1 ms floor decides
        (1.0, 0.021, True),
        (1.0, 0.019, False),  # long ones: 2 % of the interval
    ],
)
def test_a_barrier_leaks_beyond_a_millisecond_and_two_percent_of_its_interval(monkeypatch, interval, after, leak):
    assert (timing.LEAK_SECONDS, timing.LEAK_SHARE) == (1e-3, 0.02)
    monkeypatch.setattr(timing, "_audit", [(interval, after), (interval, 0.0)])
    audit = timing.barrier_audit()
    assert audit["checks"] == 2 and audit["leaks"] == int(leak) and audit["max_after_seconds"] == after
    assert audit["median_after_seconds"] == after / 2


def test_one_loss_definition_from_every_steps_loss():
    """final_loss is the mean per-step loss of the last epoch (not the last step's, not a running mean); loss_curve
    keeps the first epoch's steps; timed_epochs hands every step's output over, the first step's included."""
    from shared import metrics

    losses = []
    timing.timed_epochs(2, lambda epoch: [(epoch, i) for i in range(4)], lambda b: 10 * b[0] + b[1], outputs=losses)
    assert losses == [0, 1, 2, 3, 10, 11, 12, 13]
    assert metrics.loss_metrics(losses, 4) == {"final_loss": 11.5, "loss_curve": [0.0, 1.0, 2.0, 3.0]}
    assert len(metrics.loss_metrics(range(1000), 500)["loss_curve"]) == metrics.LOSS_CURVE_STEPS
    assert metrics.loss_metrics([], 4) == {"final_loss": None, "loss_curve": []}


def test_the_stopwatch_closes_on_its_barrier_and_audits_an_early_return_outside_the_interval(monkeypatch):
    """The stopwatch's path for a barrier that returns early (shared/timing.py, stopwatch): a barrier at each edge,
    the closing one's wait inside the interval and the opening one's not; then, after the interval closed, a device
    synchronize whose seconds the audit keeps beside that interval, so a barrier that returned before the device was
    done shows as a leak and one that waited does not. On the CPU (nothing to synchronize) nothing is audited."""
    clock = FakeClock(monkeypatch)
    monkeypatch.setattr(timing, "_audit", [])
    waits = iter(
        [0.25, 0.5] * 2
    )  # the opening barrier waits for work queued before the clock, the closing for the body's

    def barrier():
        clock.barriers += 1
        clock.now += next(waits)

    leftover = iter(
        [0.03125, 0.0625]
    )  # what a device synchronize right after the closing barrier still finds to wait for

    def sync():
        seconds = next(leftover)
        clock.now += seconds
        return seconds

    monkeypatch.setattr(timing, "device_sync", lambda: sync)
    for _ in range(2):
        with timing.stopwatch(barrier) as t:
            clock.now += 2.0
        assert t() == 2.5  # the body and the closing barrier: not the opening barrier, not the synchronize after
    assert clock.barriers == 4
    assert timing._audit == [(2.5, 0.03125), (2.5, 0.0625)]
    audit = timing.barrier_audit()  # 2 % of 2.5 s is 0.05 s: 0.031 s left over is noise, 0.062 s a leak
    assert audit == {"checks": 2, "max_after_seconds": 0.0625, "median_after_seconds": 0.046875, "leaks": 1}
    monkeypatch.setattr(timing, "_audit", [])
    monkeypatch.setattr(timing, "device_sync", lambda: None)  # the CPU
    with timing.stopwatch(clock.barrier) as t:
        clock.now += 1.0
    assert t() == 1.0 and timing._audit == [] and timing.barrier_audit() is None
