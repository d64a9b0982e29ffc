# syntax=docker/dockerfile:1
#
# arc-scaleset's image for Docker or any OCI builder (buildah, kaniko, BuildKit):
#
#   docker build -t ghcr.io/arc-scaleset/arc-scaleset:0.1.0 .
#
# `make image` builds the same image without Docker (image/build.py): Debian bookworm's python3.11, the
# dependencies of requirements.lock checked against their hashes, the project's wheel, user 65532, no shell,
# ENTRYPOINT ["arc-scaleset"]. tests/image/test_image_definition.py holds this file to image/spec.py.

# Both bases are pinned by digest (the tag beside it is for the reader; a registry serves the digest): a tag moves,
# so the same Dockerfile would build from other bytes tomorrow, and whoever can push that tag chooses what this
# image runs. To move on, read the tag's current digest (`docker buildx imagetools inspect debian:bookworm-slim`,
# the index digest, which covers every architecture) and replace it here; tests/image checks every FROM has one.
ARG BUILD_IMAGE=debian:bookworm-slim@sha256:88200866dfff7ea7f5cbcb6ec7c8a701889efe6fe859fe64d6990e4b07ea4171
# Debian 12's python3.11 without a shell or package manager; its "nonroot" user is uid 65532.
ARG RUNTIME_IMAGE=gcr.io/distroless/python3-debian12:nonroot@sha256:7d1042ce588ab97019fe95c24ffca7bc5a82ccdac572511d5e09bda4435c89c5

FROM ${BUILD_IMAGE} AS build
# Debian's python3.11 and its pip wheel (/usr/share/python-wheels, from python3.11-venv): the interpreter of
# the runtime image, and the same pip as `make image`. ca-certificates: pip downloads from PyPI here.
RUN apt-get update \
    && apt-get install -y --no-install-recommends python3.11 python3.11-venv ca-certificates \
    && rm -rf /var/lib/apt/lists/*
ENV PIP_DISABLE_PIP_VERSION_CHECK=1 PIP_NO_CACHE_DIR=1 PYTHONDONTWRITEBYTECODE=1

# The dependencies first, from the lock alone: this layer is rebuilt only when the lock changes.
COPY requirements.lock /tmp/install/requirements.lock
# pip runs from its wheel (a zip file Python can execute), so no pip is installed into the image.
RUN pip="$(echo /usr/share/python-wheels/pip-*.whl)/pip" \
    && python3.11 -m venv --without-pip /opt/arc-scaleset \
    && /opt/arc-scaleset/bin/python "$pip" install --no-compile \
        --require-hashes --no-deps --only-binary=:all: --requirement /tmp/install/requirements.lock

# The project's wheel (hatchling, pinned by pyproject.toml's build-system), then the wheel installed
# without dependencies: everything it needs is locked above.
COPY pyproject.toml README.md /src/
COPY arc_scaleset /src/arc_scaleset
COPY arc_scaleset_lab /src/arc_scaleset_lab
ARG SOURCE_DATE_EPOCH
RUN pip="$(echo /usr/share/python-wheels/pip-*.whl)/pip" \
    && python3.11 -m venv /tmp/wheel-build \
    && /tmp/wheel-build/bin/pip wheel --no-deps --wheel-dir /tmp/install/dist /src \
    && /opt/arc-scaleset/bin/python "$pip" install --no-compile --no-deps /tmp/install/dist/*.whl

# Drop what the image never uses (unused Kubernetes schema releases, activate scripts) and compile once:
# the root filesystem may be read-only.
COPY image/slim.py /tmp/install/slim.py
RUN /opt/arc-scaleset/bin/python /tmp/install/slim.py /opt/arc-scaleset \
    && /opt/arc-scaleset/bin/python -m compileall -q -f --invalidation-mode unchecked-hash /opt/arc-scaleset

FROM ${RUNTIME_IMAGE}
COPY --from=build /opt/arc-scaleset /opt/arc-scaleset
ENV PATH=/opt/arc-scaleset/bin:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin \
    SSL_CERT_FILE=/etc/ssl/certs/ca-certificates.crt \
    LANG=C.UTF-8 \
    PYTHONUNBUFFERED=1 \
    PYTHONDONTWRITEBYTECODE=1
USER 65532:65532
WORKDIR /home/nonroot
ENTRYPOINT ["arc-scaleset"]
CMD ["--help"]

ARG VERSION=0.1.0
ARG REVISION=
LABEL org.opencontainers.image.title="arc-scaleset" \
      org.opencontainers.image.description="GitHub Actions Runner Controller (runner scale sets) in Python: controller and listener" \
      org.opencontainers.image.source="https://github.com/arc-scaleset/arc-scaleset" \
      org.opencontainers.image.licenses="Apache-2.0" \
      org.opencontainers.image.version="${VERSION}" \
      org.opencontainers.image.revision="${REVISION}"
