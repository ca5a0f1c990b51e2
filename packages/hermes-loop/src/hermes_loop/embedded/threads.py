"""Pick llama.cpp's thread count per decode step from measured step times.

llama.cpp's CPU threads meet at a spinning barrier after every operation of the graph (hundreds
per decode). On an idle machine one thread per physical core is fastest; when other processes
want the same cores (a sandbox compiling, another job), a preempted thread stalls every
barrier and a 2-thread step was measured 6 to 8 times slower than a 1-thread one. The logits do
not depend on the thread count (work is split by output rows), so the count can change between
steps freely.

:class:`ThreadTuner` starts with one thread (a wrong guess of one thread costs at most the
idle speed-up, about 1.6x on 2 cores, for a couple of steps; a wrong guess of two costs 10x
when the cores are busy) and keeps, for each candidate count and step size (ids in the step, in
buckets), the seconds per evaluated id (a moving average for the count in use, the latest
probe for the other), runs the current count, and now and then probes the other for one step
of a size the current count has figures for. A probe that wins switches at once; one that
loses doubles the wait before the next (up to :data:`MAX_PROBE_GAP` steps), and one that loses
by :data:`SEVERE_LOSS` or more (a busy machine: a 2-thread step measured 10 times slower than a
1-thread one) waits the longest at once, so a busy machine pays for few slow probes.
"""

from __future__ import annotations

#: steps between probes of the other thread count, at first and at most
FIRST_PROBE_GAP = 2
MAX_PROBE_GAP = 1024
#: a probe this many times costlier than the current count waits MAX_PROBE_GAP at once
SEVERE_LOSS = 3.0
#: weight of the newest step in the moving averages
SMOOTHING = 0.3


def size_bucket(ids: int) -> int:
    """Steps of similar size cost alike per id: 1, 2-3, 4-7, ... (powers of two)."""
    return max(ids, 1).bit_length()


class ThreadTuner:
    """Chooses between one thread and ``max_threads``; feed it every step with :meth:`record`."""

    def __init__(self, max_threads: int) -> None:
        if max_threads < 1:
            raise ValueError("max_threads must be at least 1")
        self.candidates: tuple[int, ...] = (1, max_threads) if max_threads > 1 else (1,)
        self.current = 1
        self._cost: dict[tuple[int, int], float] = {}
        self._gap = FIRST_PROBE_GAP
        self._until_probe = FIRST_PROBE_GAP
        #: steps run with each thread count (for benchmarks and tests)
        self.steps: dict[int, int] = dict.fromkeys(self.candidates, 0)

    def choose(self, ids: int) -> int:
        """The thread count for a step of ``ids`` ids: the other one when a probe is due and
        the current count has figures for steps of this size."""
        if (
            len(self.candidates) > 1
            and self._until_probe <= 0
            and (self.current, size_bucket(ids)) in self._cost
        ):
            return self._other()
        return self.current

    def record(self, threads: int, seconds: float, ids: int) -> None:
        """A step with ``threads`` threads evaluated ``ids`` ids in ``seconds``."""
        if threads not in self.steps or ids <= 0:
            return
        self.steps[threads] += 1
        key = (threads, size_bucket(ids))
        cost = seconds / ids
        if threads == self.current:
            previous = self._cost.get(key)
            self._cost[key] = (
                cost if previous is None else SMOOTHING * cost + (1 - SMOOTHING) * previous
            )
            self._until_probe -= 1
            return
        # a probe: its one fresh figure against the current count's recent average
        self._cost[key] = cost
        current = self._cost.get((self.current, key[1]), float("inf"))
        if cost < current:
            self.current = threads  # the probe won
            self._gap = FIRST_PROBE_GAP
        elif cost >= SEVERE_LOSS * current:
            self._gap = MAX_PROBE_GAP
        else:
            self._gap = min(self._gap * 2, MAX_PROBE_GAP)
        self._until_probe = self._gap

    def _other(self) -> int:
        return next(c for c in self.candidates if c != self.current)
