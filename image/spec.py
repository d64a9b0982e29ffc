"""What the image is, in one place: ``make image`` builds from this, and the ``Dockerfile`` must agree with it
(tests/image/test_image_definition.py reads both).

The organisation in :data:`REPOSITORY` and :data:`SOURCE` is a placeholder (no image is published yet); the
controller chart's default ``image.repository`` names the same, so a chart installed from this checkout
pulls what ``make image`` tags.
"""

from __future__ import annotations

from typing import Final

REPOSITORY: Final = "ghcr.io/arc-scaleset/arc-scaleset"
SOURCE: Final = "https://github.com/arc-scaleset/arc-scaleset"
TITLE: Final = "arc-scaleset"
DESCRIPTION: Final = "GitHub Actions Runner Controller (runner scale sets) in Python: controller and listener"
LICENSE: Final = "Apache-2.0"

# The virtualenv holding the locked dependencies and the project; its bin/ is first on PATH.
PREFIX: Final = "/opt/arc-scaleset"

# A numeric user, so that Kubernetes' runAsNonRoot can verify it without an /etc/passwd lookup; 65532 is
# distroless' "nonroot", the base of the Dockerfile's runtime stage, so both images run as the same uid.
UID: Final = 65532
GID: Final = 65532
USER: Final = f"{UID}:{GID}"
HOME: Final = "/home/nonroot"
WORKDIR: Final = HOME

ENTRYPOINT: Final = ("arc-scaleset",)
CMD: Final = ("--help",)

ENV: Final = (
    f"PATH={PREFIX}/bin:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin",
    # Python's ssl finds the bundle here whatever OpenSSL's compiled-in directory holds.
    "SSL_CERT_FILE=/etc/ssl/certs/ca-certificates.crt",
    "LANG=C.UTF-8",
    # Log lines reach `kubectl logs` as they are written, not when a buffer fills.
    "PYTHONUNBUFFERED=1",
    # Everything is compiled at build time; the root filesystem may be read-only.
    "PYTHONDONTWRITEBYTECODE=1",
)

# Debian release of both stages; its python3.11 is the interpreter of the image (and of distroless'
# python3-debian12, the Dockerfile's runtime base).
SUITE: Final = "bookworm"
PYTHON: Final = "/usr/bin/python3.11"
# The runtime stage: the interpreter and what it links, /etc/services & co, /etc/os-release (for
# vulnerability scanners). Their dependencies come along; no shell does.
RUNTIME_PACKAGES: Final = ("python3.11", "netbase", "base-files")
# Dependencies of the above that only maintainer scripts use (readline-common's on dpkg, dpkg's on tar,
# base-files' on awk): their files are removed, so the image holds no package manager and no awk.
RUNTIME_REMOVED_PACKAGES: Final = ("dpkg", "tar", "mawk")
# The build stage adds venv and pip (Debian's own pip wheel, the same one the Dockerfile's build stage
# uses) and the CA certificates, of which only the bundle is copied into the runtime stage.
BUILD_PACKAGES: Final = ("python3.11", "python3.11-venv", "ca-certificates")


def labels(*, version: str, revision: str, created: str) -> dict[str, str]:
    """The OCI annotations of the image (Dockerfile ``LABEL``s), for ``version`` built from ``revision``."""
    found = {
        "org.opencontainers.image.title": TITLE,
        "org.opencontainers.image.description": DESCRIPTION,
        "org.opencontainers.image.source": SOURCE,
        "org.opencontainers.image.version": version,
        "org.opencontainers.image.licenses": LICENSE,
        "org.opencontainers.image.created": created,
    }
    if revision:
        found["org.opencontainers.image.revision"] = revision
    return found
