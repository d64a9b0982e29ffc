"""The controller refuses to start on CRDs that would drop what it writes (ARC's, left by a Helm upgrade), and
starts when it cannot read them (a single-namespace installation has no cluster-wide permission). The check
itself runs against the real API server in tests/integration/api/test_installed_crds.py."""

from __future__ import annotations

from typing import Any

import pytest

from arc_scaleset.api.crd.generate import custom_resource_definitions
from arc_scaleset.cmd import controller as command
from arc_scaleset.kube.errors import Forbidden, KubeError
from arc_scaleset.kube.resources import Resource


class InstalledCrds:
    """The one call the check makes: GET a CustomResourceDefinition by name."""

    def __init__(self, crds: list[dict[str, Any]] | Exception) -> None:
        self.crds = crds

    async def get(self, resource: Resource, name: str) -> dict[str, Any]:
        if isinstance(self.crds, Exception):
            raise self.crds
        return next(crd for crd in self.crds if crd["metadata"]["name"] == name)


def without_status_fields(crds: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The CRDs as ARC's are for this check: status fields only this version has are missing."""
    for crd in crds:
        status = crd["spec"]["versions"][0]["schema"]["openAPIV3Schema"]["properties"]["status"]["properties"]
        status.pop("conditions", None)
    return crds


async def test_this_versions_crds_let_the_controller_start() -> None:
    assert await command.installed_crds_are_this_versions(InstalledCrds(custom_resource_definitions()))  # type: ignore[arg-type]


async def test_crds_that_would_drop_its_fields_stop_the_controller() -> None:
    kube = InstalledCrds(without_status_fields(custom_resource_definitions()))
    assert not await command.installed_crds_are_this_versions(kube)  # type: ignore[arg-type]


@pytest.mark.parametrize("error", [Forbidden(403, "Forbidden", "no"), KubeError("unreachable")], ids=["403", "down"])
async def test_crds_it_cannot_read_do_not_stop_the_controller(error: Exception) -> None:
    assert await command.installed_crds_are_this_versions(InstalledCrds(error))  # type: ignore[arg-type]
