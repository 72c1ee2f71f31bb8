"""How far apart the CPU cell's first two cores are right now: the round trip of a value bounced between two
processes pinned to them (docs/verify.md, "What moves: the distance between the two cores").

On a shared VM the host moves its vCPUs apart from time to time, for seconds to minutes: a hand-off between two cores
then costs several times more while compute alone costs the same, and two-thread cells of many small ops run ×1.7
slower. This probe sees it from plain Python: on the reference's two-vCPU VM, 250-270 ns per round trip with the
cores near and 430-520 ns with them apart, in step with a C ping-pong measured alternately (52-57 against 340-365 ns).
A CPU cell records it just before and just after its work (`system.placement`, shared/runner.py), so a slow cell
says whether the machine's cores were apart when it ran; and between its timed windows (`Between`, read by
shared/timing.py, outside the clock), so each sample says where the cores were while it was timed.

    python -m shared.placement                 # one measurement, JSON
    python -m shared.placement --watch 60      # every half second for a minute: does this machine move its cores?

Linux only (fork and CPU affinity); None where the process may use fewer than two CPUs. Runs on Python 3.6.
"""

import argparse
import json
import mmap
import os
import signal
import statistics
import subprocess
import sys
import time
from typing import Any, Dict, List, Optional, Sequence, Tuple

SECONDS = 0.2  # one measurement: about 700,000 round trips near, 400,000 apart
BETWEEN_SECONDS = 0.01  # one measurement between two timed windows: short, as it adds to the cell's time …
CHUNK = 256  # … and robust: the median of its chunks of this many round trips, so that a framework thread still
#                    spinning after its window, which takes a CPU from the probe now and then, lifts a few chunks only
# What either probe can read (ns per round trip); a value outside is no distance (scripts/results/evidence.py).
FLOOR_NS = 150.0  # below: a round trip is the ball's line crossing twice (C: 52 ns near here) plus a Python loop of
#                   a dozen bytecodes on each side; the fastest ever recorded is 200 ns (Python 3.11, near)
CEILING_NS = 10000.0  # above: two sockets apart is under 2 µs; beyond it the scheduler took a core from the probe
#                       (a time slice: milliseconds), so the value measures the scheduler, not the cores' distance


def cpus() -> Optional[List[int]]:
    """The two CPUs the probe bounces between (the first two of this process's), or None."""
    if not hasattr(os, "sched_getaffinity") or not hasattr(os, "fork"):
        return None
    mine = sorted(os.sched_getaffinity(0))
    return mine[:2] if len(mine) >= 2 else None


def round_trip_ns(seconds: float = SECONDS) -> Optional[float]:
    """Nanoseconds per round trip between the first two CPUs of this process, or None (fewer than two CPUs)."""
    pair = cpus()
    if pair is None:
        return None
    page = mmap.mmap(-1, mmap.PAGESIZE)  # shared with the child: byte 0 the ball, 1 "stop", 2 "ready"
    child = os.fork()
    if child == 0:  # the other end: answer every odd value with the next one
        try:
            os.sched_setaffinity(0, [pair[1]])
            page[2] = 1
            while not page[1]:
                value = page[0]
                if value & 1:
                    page[0] = value + 1
        finally:
            os._exit(0)
    deadline, gone = time.perf_counter() + 5, False
    while not page[2] and not gone and time.perf_counter() < deadline:
        gone = os.waitpid(child, os.WNOHANG) != (0, 0)
        time.sleep(0.001)
    if not page[2]:  # the child could not pin itself: nothing to bounce against
        if not gone:
            os.kill(child, signal.SIGKILL)
            os.waitpid(child, 0)
        return None
    before = os.sched_getaffinity(0)
    os.sched_setaffinity(0, [pair[0]])
    try:
        value, trips = 1, 0
        start = time.perf_counter()
        end = start + seconds
        while True:
            page[0] = value
            answer = value + 1
            while page[0] != answer:
                pass
            value = 1 if value >= 251 else value + 2
            trips += 1
            if trips % 256 == 0 and time.perf_counter() > end:
                break
        elapsed = time.perf_counter() - start
    finally:
        page[1] = 1
        os.waitpid(child, 0)
        os.sched_setaffinity(0, before)
    return elapsed / trips * 1e9


def _bounce(page, value, trips):
    """`trips` round trips from `value` (odd); the next odd value."""
    for _ in range(trips):
        page[0] = value
        answer = value + 1
        while page[0] != answer:
            pass
        value = 1 if value >= 251 else value + 2
    return value


def serve() -> int:
    """`python -m shared.placement --serve`: one measurement of BETWEEN_SECONDS per line read from stdin, its round
    trip in ns (JSON, null where it cannot be measured) written back. The other end is forked once and sleeps on a
    pipe between measurements, so that the pair costs the cell nothing while its windows are timed."""
    pair = cpus()
    page, (wake_r, wake_w) = mmap.mmap(-1, mmap.PAGESIZE), os.pipe()  # byte 0 the ball, 1 "stop", 2 "playing"
    child = os.fork() if pair else None
    if child == 0:
        try:
            assert pair is not None  # forked only with a pair
            os.sched_setaffinity(0, [pair[1]])
            while os.read(wake_r, 1) == b"g":  # asleep until asked
                page[2] = 1
                while not page[1]:
                    value = page[0]
                    if value & 1:
                        page[0] = value + 1
                page[2] = 0
        finally:
            os._exit(0)
    if pair:
        os.sched_setaffinity(0, [pair[0]])
    for _ in sys.stdin:
        found = None
        if pair:  # (a pair whose other end never answered is not asked again)
            os.write(wake_w, b"g")
            deadline = time.perf_counter() + 1
            while not page[2] and time.perf_counter() < deadline:
                pass
            if page[2]:
                chunks: List[Tuple[float, float]]
                chunks, value, end = [], 1, time.perf_counter() + BETWEEN_SECONDS
                while not chunks or chunks[-1][1] < end:
                    start = time.perf_counter()
                    value = _bounce(page, value, CHUNK)
                    chunks.append((start, time.perf_counter()))
                found = statistics.median(b - a for a, b in chunks) / CHUNK * 1e9
            else:
                pair = None
            page[1] = 1
            while page[2]:
                pass
            page[1] = 0
        sys.stdout.write(json.dumps(found if found is None else round(found, 1)) + "\n")
        sys.stdout.flush()
    if child:
        os.write(wake_w, b"q")
        os.waitpid(child, 0)
    return 0


class Between:
    """The probe between a cell's timed windows: `between()` measures the round trip now (ns, or None), in a process
    pair started once (`serve`) that sleeps in between; the cell's own thread waits on a pipe meanwhile. Never raises:
    a probe that cannot start or answer measures None from then on."""

    def __init__(self) -> None:
        self.proc = None
        if cpus() is None:
            return
        try:
            self.proc = subprocess.Popen(
                [sys.executable, "-m", "shared.placement", "--serve"],
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                stderr=subprocess.DEVNULL,
                cwd=os.path.dirname(os.path.dirname(os.path.abspath(__file__))),
            )
        except OSError:
            self.proc = None

    def __call__(self):
        if self.proc is None:
            return None
        try:
            self.proc.stdin.write(b"\n")
            self.proc.stdin.flush()
            found = json.loads(self.proc.stdout.readline().decode() or "null")
        except (OSError, ValueError):
            self.close()
            return None
        return float(found) if isinstance(found, (int, float)) else None

    def close(self) -> None:
        if self.proc is not None:
            proc, self.proc = self.proc, None
            try:
                assert proc.stdin is not None  # stdin=PIPE
                proc.stdin.close()
                proc.wait(timeout=5)
            except (OSError, subprocess.SubprocessError):
                proc.kill()


def measure() -> Optional[Dict[str, Any]]:
    """{round_trip_ns, cpus} measured in a process of its own (a cell's process holds its framework's threads, which
    a fork should not copy), or None where it cannot be measured; never raises."""
    try:
        proc = subprocess.run(
            [sys.executable, "-m", "shared.placement"],
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            timeout=30,
            cwd=os.path.dirname(os.path.dirname(os.path.abspath(__file__))),
        )
        found = json.loads(proc.stdout.decode() or "null")
    except (OSError, ValueError, subprocess.SubprocessError):
        return None
    return found if isinstance(found, dict) and isinstance(found.get("round_trip_ns"), (int, float)) else None


def main(argv: Optional[Sequence[str]] = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m shared.placement", description=__doc__.split("\n\n")[0])
    ap.add_argument("--watch", type=float, metavar="SECONDS", help="measure every half second for this long")
    ap.add_argument("--serve", action="store_true", help="measure between windows, once per line read (`Between`)")
    args = ap.parse_args(argv)
    if args.serve:
        return serve()
    if args.watch:
        end = time.monotonic() + args.watch
        while time.monotonic() < end:
            value = round_trip_ns(0.5)
            print(f"{time.strftime('%H:%M:%S')} {value:.0f} ns" if value else "fewer than two CPUs", flush=True)
            if value is None:
                return 1
        return 0
    value = round_trip_ns()
    print(json.dumps({"round_trip_ns": round(value, 1), "cpus": cpus()} if value else None))
    return 0


if __name__ == "__main__":
    sys.exit(main())
