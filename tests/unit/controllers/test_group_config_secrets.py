"""GroupConfigSecrets: a shared listener's config Secret read once per change, and a write's answer kept
(pure choice + the store; the watch itself runs against the real API server in the integration tests)."""

from __future__ import annotations

from typing import Any

from arc_scaleset.api.listener_group import LABEL_GROUP
from arc_scaleset.controllers.group_config_secrets import GroupConfigSecrets, Kept, reusable
from arc_scaleset.kube.errors import NotFound
from arc_scaleset.kube.resources import Resource

NAMESPACE = "arc-systems"
NAME = "arc-shared-listener-0123456789"


def secret(version: str, data: dict[str, str], name: str = NAME) -> dict[str, Any]:
    return {
        "metadata": {"name": name, "namespace": NAMESPACE, "resourceVersion": version, "uid": "u",
                     "labels": {LABEL_GROUP: "0123456789", "other": "x"}, "annotations": {"a": "b"}},
        "data": data,
    }  # fmt: skip


class Api:
    """The API server's Secrets by name, counting GETs (the store's only collaborator)."""

    def __init__(self) -> None:
        self.objects: dict[str, dict[str, Any]] = {}
        self.gets = 0

    async def get(self, resource: Resource, name: str, *, namespace: str | None = None) -> dict[str, Any]:
        self.gets += 1
        if name not in self.objects or namespace != NAMESPACE:
            raise NotFound(404, "NotFound", f"{name} not found")
        return self.objects[name]


class Watch:
    def __init__(self) -> None:
        self.versions: dict[str, str] = {}

    def resource_version(self, name: str) -> str | None:
        return self.versions.get(name)


def store() -> tuple[Api, Watch, GroupConfigSecrets]:
    api, watch = Api(), Watch()
    return api, watch, GroupConfigSecrets(api, watch, namespace=NAMESPACE)


def test_a_kept_copy_answers_for_its_own_version_or_the_one_its_write_went_over() -> None:
    read, written = Kept("7", {}), Kept("8", {}, written_over="7")
    assert reusable(read, "7")
    assert not reusable(read, "8")
    assert reusable(written, "8")
    assert reusable(written, "7")  # the watch has not caught up with the write, and has seen nothing after it
    assert not reusable(written, "9")  # someone else wrote after
    assert not reusable(read, None)  # not watched, or the watch is not running
    assert not reusable(None, "7")


async def test_passes_read_the_secret_once_per_change() -> None:
    api, watch, secrets = store()
    api.objects[NAME] = secret("1", {"a": "x"})
    watch.versions[NAME] = "1"
    for _ in range(5):
        found = await secrets.get(NAME)
        assert found is not None
        assert found["data"] == {"a": "x"}
    assert api.gets == 1
    api.objects[NAME] = secret("2", {"a": "x", "b": "y"})
    watch.versions[NAME] = "2"
    found = await secrets.get(NAME)
    assert found is not None
    assert found["data"] == {"a": "x", "b": "y"}
    assert api.gets == 2
    assert secrets.fetches == 2
    assert secrets.reuses == 4


async def test_what_is_kept_is_the_data_and_the_metadata_a_pass_compares() -> None:
    api, watch, secrets = store()
    api.objects[NAME] = secret("1", {"a": "x"})
    api.objects[NAME]["metadata"]["managedFields"] = [{"manager": "kubectl"}]
    watch.versions[NAME] = "1"
    await secrets.get(NAME)
    kept = await secrets.get(NAME)
    assert kept == {"metadata": {k: v for k, v in secret("1", {})["metadata"].items()}, "data": {"a": "x"}}


async def test_a_write_answers_the_next_reads_without_a_get_until_the_watch_shows_another_change() -> None:
    api, watch, secrets = store()
    watch.versions[NAME] = "1"
    secrets.written(secret("2", {"a": "x"}))  # a member published its key; the watch still shows version 1
    assert (await secrets.get(NAME) or {}).get("data") == {"a": "x"}
    watch.versions[NAME] = "2"  # the watch caught up
    assert (await secrets.get(NAME) or {}).get("data") == {"a": "x"}
    assert api.gets == 0
    api.objects[NAME] = secret("3", {"a": "x", "b": "y"})  # someone else's write
    watch.versions[NAME] = "3"
    assert (await secrets.get(NAME) or {}).get("data") == {"a": "x", "b": "y"}
    assert api.gets == 1


async def test_a_secret_the_watch_does_not_show_is_read_every_time_and_never_kept() -> None:
    api, _watch, secrets = store()
    assert await secrets.get(NAME) is None  # not made yet
    api.objects[NAME] = secret("1", {})  # made, or in the way without the label: the watch does not show it
    assert await secrets.get(NAME) is not None
    assert await secrets.get(NAME) is not None
    secrets.written(secret("2", {}))
    assert await secrets.get(NAME) is not None
    assert api.gets == 4
    assert len(secrets) == 0


async def test_a_deleted_secret_is_forgotten() -> None:
    api, watch, secrets = store()
    api.objects[NAME] = secret("1", {"a": "x"})
    watch.versions[NAME] = "1"
    await secrets.get(NAME)
    del api.objects[NAME]
    watch.versions[NAME] = "9"  # the watch saw it change (then go)
    assert await secrets.get(NAME) is None
    assert len(secrets) == 0
