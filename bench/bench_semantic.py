"""Cost of semantic comparison on realistic pod specs, against the opaque-fingerprint approach it replaces.

    .venv/bin/python bench/bench_semantic.py [--repeat 7] [--number 2000]

The fingerprint baseline is what a hash-annotation design pays to decide "changed or not": a canonical
JSON dump of each side (orjson, ``OPT_SORT_KEYS``) and a sha256 of each, then a digest compare. It cannot
see that ``1000m == 1`` or that a missing field equals an empty one, so it is the cheapest possible
"compare", not an equivalent one. Cases, all in the same run:

* ``deep_equal`` of a three-container runner pod template (resources, env with valueFrom, volumes,
  tolerations) with an identical deep copy (the no-drift case every reconcile meets), with a copy that
  differs in one env value, and with a copy whose quantities are spelled differently (``4Gi`` vs
  ``4096Mi``, ``1500m`` vs ``1.5``: equal, which a fingerprint calls a change);
* ``deep_derivative`` of a desired listener pod spec against the server-defaulted live pod, against the
  fingerprint of the same pair (which always reports drift there).

Each figure is the best of ``--repeat`` timeit runs of ``--number`` calls, in microseconds per call, with
its ratio to the fingerprint baseline (below 1.0: faster than fingerprinting).
"""

from __future__ import annotations

import argparse
import copy
import functools
import hashlib
import pathlib
import sys
import timeit
from collections.abc import Callable
from typing import Any

import orjson

from arc_scaleset.kube.semantic import deep_derivative, deep_equal

# The fixtures live with the unit tests that check the verdicts these timings are for.
sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent.parent))
from tests.unit.kube.pod_fixtures import listener_pod_spec_desired, listener_pod_spec_live, runner_pod_template


def fingerprint(obj: Any) -> bytes:
    return hashlib.sha256(orjson.dumps(obj, option=orjson.OPT_SORT_KEYS)).digest()


def fingerprints_match(a: Any, b: Any) -> bool:
    return fingerprint(a) == fingerprint(b)


def per_call_us(fn: Callable[[], object], *, number: int, repeat: int) -> float:
    return min(timeit.repeat(fn, number=number, repeat=repeat)) / number * 1e6


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--repeat", type=int, default=7)
    parser.add_argument("--number", type=int, default=2000)
    args = parser.parse_args()

    template = runner_pod_template()
    same = copy.deepcopy(template)
    one_env_changed = copy.deepcopy(template)
    one_env_changed["spec"]["containers"][2]["env"][5]["value"] = "60"
    respelled = copy.deepcopy(template)
    respelled["spec"]["containers"][0]["resources"]["limits"]["memory"] = "4096Mi"
    respelled["spec"]["containers"][1]["resources"]["limits"]["cpu"] = "1.5"
    desired, live = listener_pod_spec_desired(), listener_pod_spec_live()

    cases: list[tuple[str, Any, Any, Callable[[Any, Any], bool]]] = [
        ("runner template, identical", template, same, deep_equal),
        ("runner template, one env value differs", template, one_env_changed, deep_equal),
        ("runner template, quantities respelled", template, respelled, deep_equal),
        ("listener pod, derivative of live", desired, live, deep_derivative),
    ]
    print(f"{'case':42} {'semantic':>12} {'fingerprint':>12} {'ratio':>7}  verdicts (semantic / fingerprint)")
    for name, a, b, semantic in cases:
        semantic_us = per_call_us(functools.partial(semantic, a, b), number=args.number, repeat=args.repeat)
        baseline_us = per_call_us(functools.partial(fingerprints_match, a, b), number=args.number, repeat=args.repeat)
        verdicts = f"{'same' if semantic(a, b) else 'drift'} / {'same' if fingerprints_match(a, b) else 'drift'}"
        print(f"{name:42} {semantic_us:9.2f} us {baseline_us:9.2f} us {semantic_us / baseline_us:7.2f}  {verdicts}")


if __name__ == "__main__":
    main()
