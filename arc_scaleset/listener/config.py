"""Where the listener's configuration comes from: the ``config.json`` named by ``LISTENER_CONFIG_PATH``.

The format and its rules are :class:`~arc_scaleset.api.listener_config.ListenerConfig`'s, the model the
controller writes the file with (docs/listener.md); this module only finds and reads the file. Every problem,
the file's own included, is a :class:`~arc_scaleset.api.listener_config.ListenerConfigError`.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path

from arc_scaleset.api.listener_config import CONFIG_PATH_ENV, ListenerConfig, ListenerConfigError


def config_path_from_environment(environ: Mapping[str, str] | None = None) -> Path:
    """The config path named by ``LISTENER_CONFIG_PATH``; :class:`ListenerConfigError` when it is unset or empty."""
    env = os.environ if environ is None else environ
    value = env.get(CONFIG_PATH_ENV, "")
    if not value:
        raise ListenerConfigError(
            [f"environment variable {CONFIG_PATH_ENV} is not set: it must name the config.json file"]
        )
    return Path(value)


def load_config(path: Path) -> ListenerConfig:
    """Read and validate ``path``; :class:`ListenerConfigError` lists every problem found."""
    try:
        raw = path.read_bytes()
    except OSError as exc:
        raise ListenerConfigError([f"cannot read the config file: {exc.strerror or exc}"], source=str(path)) from None
    return ListenerConfig.from_json(raw, source=str(path))
