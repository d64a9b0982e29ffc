"""The workqueue against a model of its contract, driven by hypothesis.

The model is the contract written as plain data: two FIFOs of queued keys (normal, then low priority), the
set of keys that need processing (dirty) and which of them are low priority, the set being processed, the
pending ``add_after`` deadlines and the per-key failure counts. Every step compares the real queue with the
model, so dedup, "never handed out while processing", FIFO order within a priority, normal before low,
earliest-deadline-wins and the backoff schedule are all checked; the final drain proves that every add is
eventually processed.
"""

from __future__ import annotations

import asyncio
import itertools
from collections.abc import Callable

from hypothesis import settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, precondition, rule

from arc_scaleset.clock import FakeClock
from arc_scaleset.kube.workqueue import ItemExponentialRateLimiter, WorkQueue

KEYS = st.sampled_from(["a", "b", "c", "d"])


class WorkQueueContract(RuleBasedStateMachine):
    def __init__(self) -> None:
        super().__init__()
        self.loop = asyncio.new_event_loop()
        self.clock = FakeClock()
        self.queue: WorkQueue[str] = WorkQueue(
            clock=self.clock, rate_limiter=ItemExponentialRateLimiter(base=1.0, cap=8.0)
        )
        self.now = 0
        self.seq = itertools.count()
        self.model_queue: list[str] = []
        self.model_low: list[str] = []
        self.low: set[str] = set()  # dirty keys that are low priority (queued in model_low, or processing)
        self.dirty: set[str] = set()
        self.processing: set[str] = set()
        self.waiting: dict[str, tuple[int, int]] = {}  # key -> (deadline, creation order)
        self.failures: dict[str, int] = {}

    def teardown(self) -> None:
        self.loop.run_until_complete(self.queue.shutdown(drain=False))
        self.loop.run_until_complete(asyncio.sleep(0))
        self.loop.close()

    # -- the model --------------------------------------------------------------------------------

    def model_add(self, key: str, low: bool = False) -> None:
        if key in self.dirty:
            if not low and key in self.low:
                self.low.discard(key)
                if key in self.model_low:
                    self.model_low.remove(key)
                    self.model_queue.append(key)
            return
        self.dirty.add(key)
        if low:
            self.low.add(key)
        if key not in self.processing:
            (self.model_low if low else self.model_queue).append(key)

    def model_add_after(self, key: str, delay: int) -> None:
        if delay <= 0:
            self.model_add(key)
            return
        deadline = self.now + delay
        if key in self.waiting and self.waiting[key][0] <= deadline:
            return
        self.waiting[key] = (deadline, next(self.seq))

    def in_loop(self, call: Callable[[], None]) -> None:
        """Run a synchronous queue call inside the loop (timers need one), then let new timers start."""

        async def run() -> None:
            call()
            await asyncio.sleep(0)

        self.loop.run_until_complete(run())

    # -- rules ------------------------------------------------------------------------------------

    @rule(key=KEYS)
    def add(self, key: str) -> None:
        self.queue.add(key)
        self.model_add(key)

    @rule(key=KEYS)
    def add_low_priority(self, key: str) -> None:
        self.queue.add(key, low_priority=True)
        self.model_add(key, low=True)

    @rule(key=KEYS, delay=st.integers(min_value=0, max_value=10))
    def add_after(self, key: str, delay: int) -> None:
        self.in_loop(lambda: self.queue.add_after(key, delay))
        self.model_add_after(key, delay)

    @rule(key=KEYS)
    def add_rate_limited(self, key: str) -> None:
        self.in_loop(lambda: self.queue.add_rate_limited(key))
        failures = self.failures.get(key, 0)
        self.failures[key] = failures + 1
        self.model_add_after(key, min(8, 2**failures))
        assert self.queue.num_requeues(key) == self.failures[key]

    @rule(key=KEYS)
    def forget(self, key: str) -> None:
        self.queue.forget(key)
        self.failures.pop(key, None)
        assert self.queue.num_requeues(key) == 0

    @rule()
    def get(self) -> None:
        got = self.queue.try_get()
        line = self.model_queue or self.model_low
        expected = line.pop(0) if line else None
        assert got == expected
        if got is not None:
            self.low.discard(got)
            assert got not in self.processing, "handed out a key that is being processed"
            self.dirty.discard(got)
            self.processing.add(got)

    @precondition(lambda self: bool(self.processing))
    @rule(data=st.data())
    def done(self, data: st.DataObject) -> None:
        key = data.draw(st.sampled_from(sorted(self.processing)))
        self.queue.done(key)
        self.processing.discard(key)
        if key in self.dirty:
            (self.model_low if key in self.low else self.model_queue).append(key)

    @rule(seconds=st.integers(min_value=1, max_value=10))
    def advance(self, seconds: int) -> None:
        self.now += seconds
        due = sorted((deadline, order, key) for key, (deadline, order) in self.waiting.items() if deadline <= self.now)
        for _, _, key in due:
            del self.waiting[key]
            self.model_add(key)
        self.loop.run_until_complete(self.clock.advance(seconds))

    # -- invariants -------------------------------------------------------------------------------

    @invariant()
    def matches_the_model(self) -> None:
        assert len(self.queue) == len(self.model_queue) + len(self.model_low)
        assert self.queue.processing == len(self.processing)
        assert self.queue.waiting == len(self.waiting)
        assert len(self.model_queue) == len(set(self.model_queue)), "model: a queued key is queued once"

    @rule()
    def every_added_key_is_eventually_processed(self) -> None:
        self.advance(100)
        while self.processing or self.model_queue or self.model_low:
            for busy in sorted(self.processing):
                self.done(_Draw(busy))
            while (taken := self.queue.try_get()) is not None:
                line = self.model_queue or self.model_low
                assert line
                assert taken == line.pop(0)
                self.low.discard(taken)
                self.dirty.discard(taken)
                self.processing.add(taken)
        assert not self.dirty
        assert len(self.queue) == 0
        assert self.queue.waiting == 0


class _Draw:
    """Stands in for hypothesis' data object when the drain calls the ``done`` rule directly."""

    def __init__(self, value: str) -> None:
        self.value = value

    def draw(self, _strategy: object) -> str:
        return self.value


WorkQueueContract.TestCase.settings = settings(max_examples=150, stateful_step_count=40, deadline=None)
test_workqueue_honours_its_contract = WorkQueueContract.TestCase


async def test_concurrent_workers_never_process_one_key_at_once_and_miss_no_add() -> None:
    queue: WorkQueue[int] = WorkQueue()
    in_flight: set[int] = set()
    # For each key: the number of adds so far, and the add count the latest processing start saw.
    adds: dict[int, int] = {}
    seen_at_start: dict[int, int] = {}
    overlaps: list[int] = []

    async def worker() -> None:
        while True:
            key = await queue.get()
            if key in in_flight:
                overlaps.append(key)
            in_flight.add(key)
            seen_at_start[key] = adds[key]
            for _ in range(key % 3 + 1):
                await asyncio.sleep(0)
            in_flight.discard(key)
            queue.done(key)

    workers = [asyncio.create_task(worker()) for _ in range(4)]
    for step in range(400):
        key = step % 7
        adds[key] = adds.get(key, 0) + 1
        queue.add(key)
        if step % 3 == 0:
            await asyncio.sleep(0)

    async def settled() -> None:
        while len(queue) or queue.processing:  # noqa: ASYNC110 - polling the queue's own state, no event exists
            await asyncio.sleep(0)

    await asyncio.wait_for(settled(), 5)
    for worker_task in workers:
        worker_task.cancel()
    await asyncio.gather(*workers, return_exceptions=True)
    assert overlaps == [], "keys processed by two workers at once"
    assert seen_at_start == adds, "some key's last add was never followed by a processing"
