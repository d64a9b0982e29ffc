"""Informer ingest throughput against a running cluster, as a ratio to plain list throughput.

    .venv/bin/python bench/bench_informer.py [KUBECONFIG] [--objects 5000] [--rounds 9] [--keep]

The kubeconfig comes from the argument, else ``$KUBECONFIG``, else ``~/.kube/config``. The script creates
a scratch namespace with ``--objects`` ConfigMaps (1 KiB of data each), then, in the same run and
interleaved round by round (alternating which goes first):

* **list**: ``client.list`` of the namespace (paged, 500 per page) -- the floor any cache has to pay;
* **informer**: a fresh :class:`Informer` from start until ``has_synced`` with one no-op handler -- list,
  store and indexes (namespace, owner, label), and an add event per object.

It prints the median of each in objects/s and the informer's rate as a fraction of the list's: 1.0 would
mean caching costs nothing on top of fetching. It also prints the rate of filling a Store (indexes included)
from an already fetched list: the informer's own CPU cost, without the network. The namespace is deleted
at the end unless ``--keep``.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import statistics
import sys
import time
import uuid

from arc_scaleset.kube.client import KubeClient
from arc_scaleset.kube.errors import AlreadyExists
from arc_scaleset.kube.informer import Informer, Store
from arc_scaleset.kube.resources import CONFIG_MAPS, NAMESPACES

PAYLOAD = "x" * 1024
SELECTOR = "bench=informer"  # leaves out the kube-root-ca.crt ConfigMap every namespace gets


async def create_config_maps(client: KubeClient, namespace: str, count: int) -> None:
    names = iter(range(count))
    done = 0

    async def creator() -> None:
        nonlocal done
        for i in names:
            body = {
                "metadata": {"name": f"cm-{i:05d}", "labels": {"bench": "informer", "shard": str(i % 10)}},
                "data": {"payload": PAYLOAD},
            }
            with contextlib.suppress(AlreadyExists):
                await client.create(CONFIG_MAPS, body, namespace=namespace)
            done += 1
            if done % 1000 == 0:
                print(f"  created {done}/{count}", file=sys.stderr)

    await asyncio.gather(*(creator() for _ in range(32)))


async def time_list(client: KubeClient, namespace: str) -> tuple[float, int]:
    start = time.perf_counter()
    result = await client.list(CONFIG_MAPS, namespace=namespace, label_selector=SELECTOR)
    return time.perf_counter() - start, len(result.items)


async def time_store(client: KubeClient, namespace: str) -> tuple[float, int]:
    """The informer's own CPU share: filling a Store (with its indexes) from an already fetched list."""
    items = (await client.list(CONFIG_MAPS, namespace=namespace, label_selector=SELECTOR)).items
    store = Store()
    start = time.perf_counter()
    for obj in items:
        store.upsert(obj)
    return time.perf_counter() - start, len(store)


async def time_informer(client: KubeClient, namespace: str) -> tuple[float, int]:
    informer = Informer(client, CONFIG_MAPS, namespace=namespace, label_selector=SELECTOR)
    adds = 0

    def on_add(_: object) -> None:
        nonlocal adds
        adds += 1

    informer.add_handler(on_add=on_add)
    start = time.perf_counter()
    informer.start()
    await informer.wait_synced()
    elapsed = time.perf_counter() - start
    await informer.stop()
    assert adds == len(informer.store)
    return elapsed, len(informer.store)


async def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("kubeconfig", nargs="?", default=None)
    parser.add_argument("--objects", type=int, default=5000)
    parser.add_argument("--rounds", type=int, default=9)
    parser.add_argument("--keep", action="store_true", help="keep the scratch namespace")
    args = parser.parse_args(argv)

    client = KubeClient.from_environment(args.kubeconfig)
    namespace = f"bench-informer-{uuid.uuid4().hex[:6]}"
    try:
        await client.create(NAMESPACES, {"metadata": {"name": namespace}})
        print(f"creating {args.objects} ConfigMaps in {namespace} ...", file=sys.stderr)
        await create_config_maps(client, namespace, args.objects)
        await time_list(client, namespace)  # warm up connections and the apiserver's caches

        list_rates: list[float] = []
        informer_rates: list[float] = []
        for round_number in range(args.rounds):
            # Alternate which goes first, so neither always meets a warmer (or busier) server.
            order = (time_list, time_informer) if round_number % 2 == 0 else (time_informer, time_list)
            for measure in order:
                seconds, count = await measure(client, namespace)
                assert count == args.objects, f"{measure.__name__}: {count} objects, expected {args.objects}"
                (list_rates if measure is time_list else informer_rates).append(count / seconds)

        store_rates = []
        for _ in range(args.rounds):
            seconds, count = await time_store(client, namespace)
            store_rates.append(count / seconds)

        list_rate = statistics.median(list_rates)
        informer_rate = statistics.median(informer_rates)
        print(f"objects:            {args.objects} ConfigMaps, {args.rounds} rounds (median)")
        print(f"list only:          {list_rate:10.0f} objects/s")
        print(f"informer ingest:    {informer_rate:10.0f} objects/s")
        print(f"informer / list:    {informer_rate / list_rate:10.2f}")
        print(f"store ingest alone: {statistics.median(store_rates):10.0f} objects/s (the informer's own CPU cost)")
    finally:
        if not args.keep:
            await client.delete(NAMESPACES, namespace)
        await client.close()
    return 0


if __name__ == "__main__":
    sys.exit(asyncio.run(main(sys.argv[1:])))
