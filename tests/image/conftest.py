"""Fixtures for the container image's tests.

- ``built_image`` (session): the OCI archive ``make image`` writes, built once per session or reused when
  built from the same inputs (:func:`image.build.build` with ``reuse``). Building needs root (mmdebstrap,
  chroot) and the Debian tools, installed here when missing; as CI, developers here are root.
- ``image_root`` (session): that archive unpacked, layer by layer, as a runtime would; its config.
- The cluster fixtures (``kube``, ``namespace``, ``crds_installed``) and the listener's simulated GitHub
  (``listener_sim``, ``ers``) are those of the integration suite.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

import pytest

from image import tools
from image.build import BuiltImage, build
from image.oci import ArchivedImage, unpack
from tests.integration.conftest import crds_installed, kube, namespace
from tests.integration.listener.conftest import ers, listener_sim, sim_config

__all__ = ["crds_installed", "ers", "kube", "listener_sim", "namespace", "sim_config"]


@dataclass(frozen=True)
class UnpackedImage:
    root: Path
    image: ArchivedImage


@pytest.fixture(scope="session")
def built_image() -> BuiltImage:
    # Outside CI a non-root run skips these (and says how to run them); CI runs as root, where they must run.
    if os.geteuid() != 0 and not os.environ.get("CI"):
        pytest.skip("building and running the image needs root (mmdebstrap, chroot, runc): sudo make image-test")
    tools.ensure({**tools.BUILD_TOOLS, **tools.TEST_TOOLS})
    return build(reuse=True)


@pytest.fixture(scope="session")
def image_root(built_image: BuiltImage, tmp_path_factory: pytest.TempPathFactory) -> UnpackedImage:
    root = tmp_path_factory.mktemp("image-rootfs")
    # The container's "/": pytest makes its directories private to root, an image's root is not.
    root.chmod(0o755)
    return UnpackedImage(root=root, image=unpack(built_image.archive, root))
