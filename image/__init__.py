"""The container image of arc-scaleset, built without Docker: ``make image`` (``python -m image.build``).

- :mod:`image.spec`: what the image is (name, user, entrypoint, environment, labels, Debian packages); the
  ``Dockerfile`` states the same, and a test holds the two together.
- :mod:`image.debian`: root filesystems from Debian packages (mmdebstrap, ``extract`` variant: no shell).
- :mod:`image.python_env`: the virtualenv with the locked dependencies and the project's wheel.
- :mod:`image.oci`: reproducible layers, the OCI image layout and its archive; reading one back.
- :mod:`image.build`: the command that puts them together.

This directory is not part of the wheel: it is how the project ships, not what it ships.
"""
