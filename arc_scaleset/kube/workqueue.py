"""A work queue of keys with client-go's guarantees, for asyncio.

The contract (the same as client-go's ``workqueue``; controllers rely on every line of it):

* **Dedup.** A key that is queued and not yet handed out is queued once, however often it is added.
* **Never concurrently.** :meth:`WorkQueue.get` never hands out a key that is being processed (between
  its ``get`` and its :meth:`WorkQueue.done`). A key added while it is processed is queued again when
  ``done`` is called, so the change that caused the add is never missed.
* **Fair order.** Keys are handed out in the order they were first queued, those added at normal priority
  before those added with ``low_priority`` (the replay of every cached object when a controller starts, as
  controller-runtime's priority queue lowers the initial list's events): new work goes ahead of re-checking
  what has not changed. A low-priority key added again at normal priority moves up to the end of the normal
  line; a low-priority add never lowers a key already queued at normal priority.
* **Later.** :meth:`WorkQueue.add_after` adds a key once a delay has passed on the queue's clock; if the
  key is already waiting, the earlier of the two deadlines wins.
* **Backoff.** :meth:`WorkQueue.add_rate_limited` adds a key after the delay its rate limiter chooses
  (per-key exponential by default: 5 ms, 10 ms, 20 ms, ... capped at 1000 s); :meth:`WorkQueue.forget`
  resets that key's backoff, and should be called whenever a key was processed successfully.
* **Shutdown.** After :meth:`WorkQueue.shutdown` adds are ignored and ``get`` raises :class:`ShutDown`
  (queued keys are dropped: reconciles are level-triggered, the next process recomputes everything).
  ``shutdown(drain=True)`` returns once every key handed out has been marked done.

The queue is not thread-safe: use it from one event loop.
"""

from __future__ import annotations

import asyncio
import collections
import itertools
from collections.abc import Hashable
from typing import Generic, Protocol, TypeVar

from arc_scaleset.clock import REAL_CLOCK, Clock
from arc_scaleset.kube.runtime_metrics import RuntimeMetrics

K = TypeVar("K", bound=Hashable)

DEFAULT_BASE_DELAY = 0.005
DEFAULT_MAX_DELAY = 1000.0


class ShutDown(Exception):  # noqa: N818 - named like asyncio.QueueShutDown, which it mirrors
    """Raised by :meth:`WorkQueue.get` once the queue has been shut down."""


class RateLimiter(Protocol):
    """Chooses how long a key waits before it is retried."""

    def when(self, key: Hashable) -> float:
        """The delay before the next retry of ``key``; counts the retry."""
        ...

    def forget(self, key: Hashable) -> None:
        """Stop tracking ``key``: its next failure starts from the smallest delay again."""
        ...

    def num_requeues(self, key: Hashable) -> int:
        """How many retries of ``key`` have been counted since it was last forgotten."""
        ...


class ItemExponentialRateLimiter:
    """Per-key delays ``base * 2**failures``, capped at ``cap``."""

    def __init__(self, *, base: float = DEFAULT_BASE_DELAY, cap: float = DEFAULT_MAX_DELAY) -> None:
        if base <= 0 or cap < base:
            raise ValueError(f"need 0 < base <= cap, got base={base} cap={cap}")
        self.base = base
        self.cap = cap
        self._failures: dict[Hashable, int] = {}

    def when(self, key: Hashable) -> float:
        failures = self._failures.get(key, 0)
        self._failures[key] = failures + 1
        # Bound the exponent: 2.0**1024 overflows, and anything past the cap is the cap anyway.
        return min(self.cap, self.base * 2.0 ** min(failures, 256))

    def forget(self, key: Hashable) -> None:
        self._failures.pop(key, None)

    def num_requeues(self, key: Hashable) -> int:
        return self._failures.get(key, 0)


class BucketRateLimiter:
    """An overall token bucket (``qps`` refill, ``burst`` size) shared by all keys.

    Each retry reserves a token; when the bucket is empty the delay is how long until that token would
    have refilled, so a storm of failures is spread out at ``qps``.
    """

    def __init__(self, *, qps: float = 10.0, burst: int = 100, clock: Clock = REAL_CLOCK) -> None:
        if qps <= 0 or burst < 1:
            raise ValueError(f"need qps > 0 and burst >= 1, got qps={qps} burst={burst}")
        self.qps = qps
        self.burst = burst
        self._clock = clock
        self._tokens = float(burst)
        self._last = clock.monotonic()

    def when(self, key: Hashable) -> float:
        now = self._clock.monotonic()
        self._tokens = min(float(self.burst), self._tokens + (now - self._last) * self.qps)
        self._last = now
        self._tokens -= 1.0
        return 0.0 if self._tokens >= 0 else -self._tokens / self.qps

    def forget(self, key: Hashable) -> None:
        pass

    def num_requeues(self, key: Hashable) -> int:
        return 0


class MaxOfRateLimiter:
    """The longest delay any of its limiters asks for."""

    def __init__(self, *limiters: RateLimiter) -> None:
        if not limiters:
            raise ValueError("MaxOfRateLimiter needs at least one limiter")
        self.limiters = limiters

    def when(self, key: Hashable) -> float:
        return max(limiter.when(key) for limiter in self.limiters)

    def forget(self, key: Hashable) -> None:
        for limiter in self.limiters:
            limiter.forget(key)

    def num_requeues(self, key: Hashable) -> int:
        return max(limiter.num_requeues(key) for limiter in self.limiters)


def default_rate_limiter() -> RateLimiter:
    """controller-runtime's current default: per-key exponential backoff only (5 ms .. 1000 s)."""
    return ItemExponentialRateLimiter()


def bucket_rate_limiter(*, clock: Clock = REAL_CLOCK) -> RateLimiter:
    """client-go's classic controller default: per-key exponential backoff and a 10 qps / 100 bucket."""
    return MaxOfRateLimiter(ItemExponentialRateLimiter(), BucketRateLimiter(qps=10.0, burst=100, clock=clock))


class WorkQueue(Generic[K]):
    """A deduplicating, delaying, rate-limited queue of keys; see the module docstring for the contract.

    ``name`` labels the metrics (``name`` and ``controller`` labels, as controller-runtime does).
    """

    def __init__(
        self,
        *,
        name: str = "",
        rate_limiter: RateLimiter | None = None,
        clock: Clock = REAL_CLOCK,
        metrics: RuntimeMetrics | None = None,
    ) -> None:
        self.name = name
        self._rate_limiter = rate_limiter if rate_limiter is not None else default_rate_limiter()
        self._clock = clock
        self._queue: collections.deque[K] = collections.deque()
        # The low-priority line: entries (key, ticket); an entry is live while _low[key] is its ticket, so a key
        # moved up to the normal line leaves a dead entry behind instead of an O(n) removal.
        self._low_line: collections.deque[tuple[K, int]] = collections.deque()
        self._low: dict[K, int] = {}
        self._tickets = itertools.count()
        # Low-priority keys added while processing: queued to the low line when done() is called.
        self._low_after_done: set[K] = set()
        # Keys that need processing: queued ones, and processing ones that were added again.
        self._dirty: set[K] = set()
        self._processing: set[K] = set()
        # add_after: one pending timer per key, holding the earliest deadline asked for.
        self._waiting: dict[K, tuple[float, asyncio.Task[None]]] = {}
        self._getters: collections.deque[asyncio.Future[None]] = collections.deque()
        self._shutting_down = False
        self._drained = asyncio.Event()
        self._drained.set()
        # Metric timestamps (monotonic), like client-go's addTimes/processingStartTimes.
        self._added_at: dict[K, float] = {}
        self._started_at: dict[K, float] = {}
        self._metrics = _QueueMetrics(metrics, name) if metrics is not None else None

    # -- adding ---------------------------------------------------------------------------------------

    def add(self, key: K, *, low_priority: bool = False) -> None:
        """Mark ``key`` as needing processing (a no-op if it already is, or after shutdown); ``low_priority``:
        behind every key added without it (see "Fair order")."""
        if self._shutting_down:
            return
        if key in self._dirty:
            if not low_priority:
                self._raise_priority(key)
            return
        self._dirty.add(key)
        if self._metrics is not None:
            self._metrics.adds.inc()
            self._added_at.setdefault(key, self._clock.monotonic())
        if key in self._processing:
            # Processed again when done() is called: never two workers on one key.
            if low_priority:
                self._low_after_done.add(key)
            return
        self._push(key, low_priority=low_priority)

    def add_after(self, key: K, delay: float) -> None:
        """Add ``key`` once ``delay`` seconds have passed; the earliest pending deadline for a key wins."""
        if self._shutting_down:
            return
        if delay <= 0:
            self.add(key)
            return
        ready_at = self._clock.monotonic() + delay
        pending = self._waiting.get(key)
        if pending is not None:
            if pending[0] <= ready_at:
                return
            pending[1].cancel()
        self._waiting[key] = (ready_at, asyncio.get_running_loop().create_task(self._add_when_ready(key, ready_at)))

    def add_rate_limited(self, key: K) -> None:
        """Add ``key`` after its rate limiter's delay (the retry path after a failure)."""
        if self._shutting_down:
            return
        if self._metrics is not None:
            self._metrics.retries.inc()
        self.add_after(key, self._rate_limiter.when(key))

    def forget(self, key: K) -> None:
        """Reset ``key``'s backoff (call it after a success); does not remove a queued key."""
        self._rate_limiter.forget(key)

    def num_requeues(self, key: K) -> int:
        """How many rate-limited retries ``key`` has had since it was last forgotten."""
        return self._rate_limiter.num_requeues(key)

    # -- taking ---------------------------------------------------------------------------------------

    async def get(self) -> K:
        """Wait for a key and mark it as processing; the caller must call :meth:`done` with it.

        Raises :class:`ShutDown` once the queue is shut down (also to callers already waiting).
        """
        while True:
            key = self.try_get()
            if key is not None:
                return key
            if self._shutting_down:
                raise ShutDown(self.name)
            waiter: asyncio.Future[None] = asyncio.get_running_loop().create_future()
            self._getters.append(waiter)
            try:
                await waiter
            except asyncio.CancelledError:
                # Woken and cancelled at once: hand the wake-up to another getter so no key is stranded.
                if waiter.done() and not waiter.cancelled():
                    self._wake_one()
                raise

    def try_get(self) -> K | None:
        """:meth:`get` without waiting: a key (now processing), or ``None`` if none is queued."""
        if self._shutting_down:
            return None
        key = self._pop()
        if key is None:
            return None
        self._dirty.discard(key)
        self._processing.add(key)
        self._drained.clear()
        if self._metrics is not None:
            now = self._clock.monotonic()
            self._metrics.depth.dec()
            added = self._added_at.pop(key, None)
            if added is not None:
                self._metrics.queue_duration.observe(now - added)
            self._started_at[key] = now
        return key

    def done(self, key: K) -> None:
        """Mark ``key`` as processed; if it was added meanwhile, it is queued again now."""
        if key not in self._processing:
            raise ValueError(f"done({key!r}) for a key that is not being processed")
        self._processing.discard(key)
        if self._metrics is not None:
            started = self._started_at.pop(key, None)
            if started is not None:
                self._metrics.work_duration.observe(self._clock.monotonic() - started)
        low_priority = key in self._low_after_done
        self._low_after_done.discard(key)
        if key in self._dirty and not self._shutting_down:
            self._push(key, low_priority=low_priority)
        if not self._processing:
            self._drained.set()

    # -- stopping -------------------------------------------------------------------------------------

    async def shutdown(self, *, drain: bool = True) -> None:
        """Stop handing out keys; with ``drain``, return once every key handed out is done.

        Idempotent. Keys still queued or waiting for their delay are dropped.
        """
        if not self._shutting_down:
            self._shutting_down = True
            for _, task in self._waiting.values():
                task.cancel()
            self._waiting.clear()
            if self._metrics is not None:
                self._metrics.depth.dec(len(self._queue))
            self._queue.clear()
            self._low_line.clear()
            self._low.clear()
            self._low_after_done.clear()
            self._dirty.clear()
            self._added_at.clear()
            while self._getters:
                waiter = self._getters.popleft()
                if not waiter.done():
                    waiter.set_result(None)
        if drain:
            await self._drained.wait()

    @property
    def shutting_down(self) -> bool:
        return self._shutting_down

    def __len__(self) -> int:
        """How many keys are queued (not counting those processing or waiting for a delay)."""
        return len(self._queue) + len(self._low)

    @property
    def processing(self) -> int:
        """How many keys are handed out and not yet done."""
        return len(self._processing)

    @property
    def waiting(self) -> int:
        """How many keys wait for an ``add_after`` deadline."""
        return len(self._waiting)

    # -- internals ------------------------------------------------------------------------------------

    def _push(self, key: K, *, low_priority: bool = False) -> None:
        if low_priority:
            ticket = next(self._tickets)
            self._low[key] = ticket
            self._low_line.append((key, ticket))
        else:
            self._queue.append(key)
        if self._metrics is not None:
            self._metrics.depth.inc()
        self._wake_one()

    def _pop(self) -> K | None:
        """The next key to hand out: the normal line first, then the first live entry of the low line."""
        if self._queue:
            return self._queue.popleft()
        while self._low_line:
            key, ticket = self._low_line.popleft()
            if self._low.get(key) == ticket:
                del self._low[key]
                return key
        return None

    def _raise_priority(self, key: K) -> None:
        """A dirty key added at normal priority: a low-priority one moves to the end of the normal line (its entry
        in the low line is dead from now on), or will be queued there when its processing is done."""
        if self._low.pop(key, None) is not None:
            self._queue.append(key)
        self._low_after_done.discard(key)

    def _wake_one(self) -> None:
        while self._getters:
            waiter = self._getters.popleft()
            if not waiter.done():
                waiter.set_result(None)
                return

    async def _add_when_ready(self, key: K, ready_at: float) -> None:
        # Sleep until an absolute deadline: the task may first run after the clock has already moved.
        remaining = ready_at - self._clock.monotonic()
        if remaining > 0:
            await self._clock.sleep(remaining)
        pending = self._waiting.get(key)
        if pending is not None and pending[1] is asyncio.current_task():
            del self._waiting[key]
        self.add(key)


class _QueueMetrics:
    """The labelled metric children of one queue, resolved once (labels() is not free)."""

    def __init__(self, metrics: RuntimeMetrics, name: str) -> None:
        labels = {"name": name, "controller": name}
        self.depth = metrics.workqueue_depth.labels(**labels)
        self.adds = metrics.workqueue_adds.labels(**labels)
        self.queue_duration = metrics.workqueue_queue_duration.labels(**labels)
        self.work_duration = metrics.workqueue_work_duration.labels(**labels)
        self.retries = metrics.workqueue_retries.labels(**labels)
