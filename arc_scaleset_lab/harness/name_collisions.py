"""Listener names that collide, for the tests of the tenancy rules (docs/controllers.md, "Tenancy").

A scale set's listener is named ``<name>-<h8>-listener``, ``h8`` being the first 8 decimal digits of FNV-32a over
``namespace@runnerGroup@githubConfigUrl`` (ARC's naming, :func:`arc_scaleset.api.naming.autoscaling_listener_name`).
8 digits of a 32-bit hash are no defence against a tenant who wants another's listener name: FNV-1a can be run
backwards (each step multiplies by an odd prime, invertible modulo 2**32), so a meet in the middle finds an
organisation name that gives a scale set of another namespace the same listener name in well under a second.
:func:`colliding_config_url` does that, so a test can show what the controller does with such a pair.
"""

from __future__ import annotations

import itertools
from collections.abc import Iterator
from typing import Final

from arc_scaleset.api.naming import autoscaling_listener_name, fnv32a

_PRIME: Final = 0x01000193
_PRIME_INVERSE: Final = pow(_PRIME, -1, 2**32)
_MASK: Final = 0xFFFFFFFF
_ALPHABET: Final = b"abcdefghijklmnopqrstuvwxyz0123456789"
_HALF: Final = 3
"""Characters on each side of the meet: 36**3 states forward, as many backward per target value."""


def colliding_config_url(
    *, name: str, namespace: str, runner_group: str, config_url: str, other_namespace: str, other_url_prefix: str
) -> str:
    """A config URL ``other_url_prefix`` + 6 characters of ``[a-z0-9]`` that gives the scale set ``name`` in
    ``other_namespace`` (same runner group) the listener name of the scale set ``name`` in ``namespace`` with
    ``config_url``. Deterministic for the same inputs. ``other_url_prefix`` should end in an organisation name
    (the characters extend it). Raises :class:`LookupError` when the search finds none (it finds dozens)."""
    wanted = autoscaling_listener_name(
        name, namespace=namespace, runner_group=runner_group, github_config_url=config_url
    )
    start = fnv32a(f"{other_namespace}@{runner_group}@{other_url_prefix}".encode())
    forward = {state: suffix for suffix, state in _forward(start)}
    digits = str(fnv32a(f"{namespace}@{runner_group}@{config_url}".encode()))
    for target in _same_first_digits(digits):
        for tail in itertools.product(_ALPHABET, repeat=_HALF):
            head = forward.get(_backward(target, tail))
            if head is None:
                continue
            url = other_url_prefix + (head + bytes(tail)).decode()
            found = autoscaling_listener_name(
                name, namespace=other_namespace, runner_group=runner_group, github_config_url=url
            )
            if found == wanted:
                return url
    raise LookupError(f"no {2 * _HALF}-character extension of {other_url_prefix!r} collides with {wanted}")


def _forward(start: int) -> Iterator[tuple[bytes, int]]:
    """Every ``_HALF``-character suffix with the FNV-1a state after it, from state ``start``."""
    for suffix in itertools.product(_ALPHABET, repeat=_HALF):
        state = start
        for byte in suffix:
            state = ((state ^ byte) * _PRIME) & _MASK
        yield bytes(suffix), state


def _backward(state: int, tail: tuple[int, ...]) -> int:
    """The FNV-1a state before ``tail`` that ends in ``state``."""
    for byte in reversed(tail):
        state = ((state * _PRIME_INVERSE) & _MASK) ^ byte
    return state


def _same_first_digits(digits: str) -> Iterator[int]:
    """The 32-bit values whose decimal form starts with the same 8 digits as ``digits`` (the whole of it when
    shorter): those the listener name cannot tell from it."""
    prefix = digits[:8]
    if len(prefix) < 8:
        yield int(digits)
        return
    for extra in ("", *map(str, range(10)), *(f"{n:02d}" for n in range(100))):
        value = int(prefix + extra)
        if value <= _MASK:
            yield value
