"""Exponential backoff with jitter: the one delay policy for every retry loop in the project."""

from __future__ import annotations

import random
from dataclasses import dataclass, field

_SHARED_RNG = random.Random()
"""Jitter needs no independent stream per backoff, and seeding one from the OS costs more than the
request it would delay (a backoff is made per API request)."""


@dataclass
class Backoff:
    """Delays ``base * factor**n`` capped at ``cap``, each stretched by up to ``jitter`` (a fraction).

    ``next_delay()`` returns the delay for the current attempt and counts it; ``reset()`` starts over
    after a success. Jitter only ever lengthens a delay, so ``base`` is a true lower bound.
    """

    base: float = 1.0
    cap: float = 30.0
    factor: float = 2.0
    jitter: float = 0.1
    attempts: int = 0
    rng: random.Random = field(default=_SHARED_RNG, repr=False)

    def peek(self) -> float:
        """The delay the next call to :meth:`next_delay` will return, before jitter; ``cap`` however many
        attempts came before."""
        try:
            grown = self.base * self.factor**self.attempts
        except OverflowError:
            # factor**attempts outgrows a float after about a thousand failures in a row (hours at a cap of
            # seconds): long past the cap, and no reason for the retry loop that asked to die.
            return self.cap
        return min(self.cap, grown)

    def next_delay(self) -> float:
        delay = self.peek()
        self.attempts += 1
        return delay * (1.0 + self.jitter * self.rng.random())

    def reset(self) -> None:
        self.attempts = 0
