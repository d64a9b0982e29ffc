"""ReferencedData: a watched Secret's data fetched once per version the watch shows (pure choice + the cache)."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from arc_scaleset.controllers.referenced_data import ReferencedData, _Entry, reusable
from arc_scaleset.controllers.referenced_objects import Reference
from arc_scaleset.kube.errors import NotFound
from arc_scaleset.kube.resources import CONFIG_MAPS, PODS, SECRETS, Resource


class Objects:
    """The API server's objects by namespace and name, counting GETs (the cache's only collaborator)."""

    def __init__(self) -> None:
        self.objects: dict[tuple[str, str], dict[str, Any]] = {}
        self.gets = 0

    def put(self, namespace: str, name: str, version: str, data: dict[str, str]) -> None:
        self.objects[(namespace, name)] = {"metadata": {"resourceVersion": version}, "data": data}

    async def get(self, resource: Resource, name: str, *, namespace: str | None = None) -> dict[str, Any]:
        self.gets += 1
        found = self.objects.get((namespace or "", name))
        if found is None:
            raise NotFound(404, "NotFound", f"{name} not found")
        return found


class Versions:
    def __init__(self) -> None:
        self.versions: dict[Reference, str] = {}

    def resource_version(self, reference: Reference) -> str | None:
        return self.versions.get(reference)


def test_reusable_only_for_the_version_the_watch_shows() -> None:
    entry = _Entry("7", {})
    assert reusable(entry, "7")
    assert not reusable(entry, "8")
    assert not reusable(entry, None)  # not watched (any more)
    assert not reusable(None, "7")


async def test_a_watched_secret_is_fetched_once_per_version() -> None:
    api, versions = Objects(), Versions()
    reads = ReferencedData(api, versions)
    secret = Reference("Secret", "team-a", "gh")
    api.put("team-a", "gh", "1", {"github_token": "dG9rZW4="})
    versions.versions[secret] = "1"
    for _ in range(3):
        assert (await reads.get(SECRETS, "gh", namespace="team-a"))["data"] == {"github_token": "dG9rZW4="}
    assert api.gets == 1
    api.put("team-a", "gh", "2", {"github_token": "bmV3"})
    assert (await reads.get(SECRETS, "gh", namespace="team-a"))["data"]["github_token"] == "dG9rZW4="  # watch lags
    versions.versions[secret] = "2"
    assert (await reads.get(SECRETS, "gh", namespace="team-a"))["data"]["github_token"] == "bmV3"
    assert (await reads.get(SECRETS, "gh", namespace="team-a"))["data"]["github_token"] == "bmV3"
    assert api.gets == 2


async def test_what_the_watch_does_not_know_is_read_every_time_and_not_kept() -> None:
    api, versions = Objects(), Versions()
    reads = ReferencedData(api, versions)
    api.put("team-a", "gh", "1", {})
    api.put("team-b", "gh", "1", {})
    versions.versions[Reference("Secret", "team-a", "gh")] = "1"
    await reads.get(SECRETS, "gh", namespace="team-b")  # same name, another namespace: not watched
    await reads.get(SECRETS, "gh", namespace="team-b")
    await reads.get(CONFIG_MAPS, "gh", namespace="team-a")  # another kind
    await reads.get(PODS, "gh", namespace="team-a")  # not a referenced kind at all
    assert api.gets == 4
    assert len(reads) == 0
    await reads.get(SECRETS, "gh", namespace="team-a")
    assert len(reads) == 1
    del versions.versions[Reference("Secret", "team-a", "gh")]  # its listener is gone
    await reads.get(SECRETS, "gh", namespace="team-a")
    assert len(reads) == 0


async def test_a_missing_secret_is_asked_for_every_time() -> None:
    api, versions = Objects(), Versions()
    reads = ReferencedData(api, versions)
    versions.versions[Reference("Secret", "team-a", "gh")] = "1"
    for _ in range(2):
        with pytest.raises(NotFound):
            await reads.get(SECRETS, "gh", namespace="team-a")
    assert api.gets == 2


async def test_without_a_watch_every_read_goes_to_the_api_server() -> None:
    api = Objects()
    api.put("team-a", "gh", "1", {})
    reads = ReferencedData(api)
    await reads.get(SECRETS, "gh", namespace="team-a")
    await reads.get(SECRETS, "gh", namespace="team-a")
    assert api.gets == 2


async def test_reads_at_once_share_one_get() -> None:
    api, versions = Objects(), Versions()
    reads = ReferencedData(api, versions)
    api.put("team-a", "gh", "1", {"github_token": "dG9rZW4="})
    versions.versions[Reference("Secret", "team-a", "gh")] = "1"
    results = await asyncio.gather(*(reads.get(SECRETS, "gh", namespace="team-a") for _ in range(5)))
    assert api.gets == 1
    assert {result["data"]["github_token"] for result in results} == {"dG9rZW4="}
