"""A real Prometheus in the lab, scraping the controller and the listeners of a running :class:`System`.

The binary is Prometheus itself, built from its Go module (:mod:`arc_scaleset_lab.cluster.prometheus_binary`).
:class:`LabPrometheus` starts it as a child process (stopped by its PID, and killed by the kernel if the lab
dies) on a free loopback port, with a TSDB in the lab's work directory, and reads it only through its HTTP API
(``/api/v1/query``, ``/api/v1/rules``, ``/api/v1/alerts``): what a user's Grafana or alerting reads.

Targets come from a ``file_sd`` file the lab rewrites (:meth:`LabPrometheus.set_targets`): listeners come and go
with their pods, and Prometheus picks up a rewritten file without a restart. Each target names its own metrics
path (``__metrics_path__``) and carries ``component`` (``controller`` or ``listener``). Rule files are loaded by
Prometheus itself from ``rule_files``; a rule it cannot parse stops it from starting, and one it cannot evaluate
shows ``health: err`` in ``/api/v1/rules``.
"""

from __future__ import annotations

import contextlib
import json
import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import aiohttp
import yaml

from arc_scaleset.api.listener_config import CONFIG_PATH_ENV
from arc_scaleset_lab.cluster import prometheus_binary
from arc_scaleset_lab.cluster.localcluster import free_port
from arc_scaleset_lab.cluster.processes import ManagedProcess
from arc_scaleset_lab.harness.system import System
from arc_scaleset_lab.harness.waiting import eventually

TARGETS_FILE = "targets.json"


class PrometheusError(RuntimeError):
    """Prometheus did not start, or its API answered with an error; the message says which."""


@dataclass(frozen=True)
class ScrapeTarget:
    """One ``/metrics`` endpoint: ``url`` as ``http://host:port/path``, and the process it belongs to."""

    component: str
    url: str


def targets_document(targets: Sequence[ScrapeTarget]) -> list[dict[str, Any]]:
    """The ``file_sd`` document for ``targets``: one group per target, its path in ``__metrics_path__``."""
    groups = []
    for target in targets:
        parts = urlsplit(target.url)
        labels = {"__metrics_path__": parts.path or "/metrics", "component": target.component}
        groups.append({"targets": [parts.netloc], "labels": labels})
    return groups


def config_document(
    *, targets_file: Path, rule_files: Sequence[Path], scrape_interval: float, evaluation_interval: float
) -> dict[str, Any]:
    """Prometheus's configuration: one job reading ``targets_file``, the given rule files, no alertmanager
    (alerts are read from ``/api/v1/alerts``). Intervals are whole milliseconds, as Prometheus parses them."""
    return {
        "global": {
            "scrape_interval": _duration(scrape_interval),
            "scrape_timeout": _duration(scrape_interval),
            "evaluation_interval": _duration(evaluation_interval),
        },
        "rule_files": [str(path) for path in rule_files],
        "scrape_configs": [
            {
                "job_name": "arc-scaleset",
                "file_sd_configs": [{"files": [str(targets_file)], "refresh_interval": "1s"}],
            }
        ],
    }


def _duration(seconds: float) -> str:
    return f"{max(1, round(seconds * 1000))}ms"


def listener_metrics_urls(system: System) -> list[str]:
    """The ``/metrics`` URLs of the running listener processes: each one's config (its sandbox copy, named by
    its environment) holds the address the node agent gave it. Listeners without metrics are left out."""
    urls = []
    for pid in system.listener_pids().values():
        with contextlib.suppress(OSError, ValueError, KeyError):
            environ = dict(
                item.split(b"=", 1) for item in Path(f"/proc/{pid}/environ").read_bytes().split(b"\0") if b"=" in item
            )
            config = json.loads(Path(environ[CONFIG_PATH_ENV.encode()].decode()).read_text())
            if config.get("metrics_addr"):
                urls.append(f"http://{config['metrics_addr']}{config.get('metrics_endpoint') or '/metrics'}")
    return urls


def system_targets(system: System) -> list[ScrapeTarget]:
    """The controller's endpoint and every running listener's."""
    controller = [ScrapeTarget("controller", system.controller_metrics_url)] if system.controller_metrics_url else []
    return controller + [ScrapeTarget("listener", url) for url in listener_metrics_urls(system)]


class LabPrometheus:
    """Prometheus scraping the lab: ``start``, ``set_targets``, query through the HTTP API, ``stop``."""

    def __init__(
        self,
        workdir: Path,
        *,
        rule_files: Sequence[Path] = (),
        scrape_interval: float = 1.0,
        evaluation_interval: float = 1.0,
        binary: Path | None = None,
    ) -> None:
        self.workdir = workdir
        self.rule_files = tuple(rule_files)
        self.scrape_interval = scrape_interval
        self.evaluation_interval = evaluation_interval
        self.binary = binary or prometheus_binary.binary()
        self.port = 0
        self._process: ManagedProcess | None = None

    @property
    def url(self) -> str:
        """The base URL of Prometheus's HTTP API and UI (empty before :meth:`start`)."""
        return f"http://127.0.0.1:{self.port}" if self.port else ""

    @property
    def pid(self) -> int | None:
        return self._process.pid if self._process else None

    async def start(self, *, timeout: float = 60.0) -> None:
        """Write the configuration, start Prometheus and return once ``/-/ready`` answers 200."""
        self.workdir.mkdir(parents=True, exist_ok=True)
        self.set_targets(())
        config = config_document(
            targets_file=self.workdir / TARGETS_FILE,
            rule_files=self.rule_files,
            scrape_interval=self.scrape_interval,
            evaluation_interval=self.evaluation_interval,
        )
        (self.workdir / "prometheus.yml").write_text(yaml.safe_dump(config, sort_keys=False))
        self.port = free_port()
        self._process = ManagedProcess(
            "prometheus",
            [
                str(self.binary),
                f"--config.file={self.workdir / 'prometheus.yml'}",
                f"--storage.tsdb.path={self.workdir / 'data'}",
                f"--web.listen-address=127.0.0.1:{self.port}",
                "--log.level=warn",
            ],
            log_path=self.workdir / "prometheus.log",
        )
        self._process.start(tie_to_parent=True)
        await eventually(self._ready, what="Prometheus ready", timeout=timeout, max_interval=0.2)

    def stop(self) -> None:
        """Stop Prometheus (SIGTERM, then SIGKILL) by its PID."""
        if self._process is not None:
            self._process.stop()
            self._process = None

    def log_tail(self, lines: int = 20) -> str:
        return self._process.log_tail(lines) if self._process else ""

    def set_targets(self, targets: Sequence[ScrapeTarget]) -> None:
        """Replace the scraped endpoints (written whole and renamed: Prometheus never reads half a file)."""
        path = self.workdir / TARGETS_FILE
        staging = path.with_suffix(".tmp")
        staging.write_text(json.dumps(targets_document(targets)))
        os.replace(staging, path)

    async def query(self, expr: str) -> list[dict[str, Any]]:
        """The instant vector ``expr`` evaluates to now (``/api/v1/query``): its series, ``metric`` and ``value``."""
        data = await self._api("/api/v1/query", {"query": expr})
        if data["resultType"] != "vector":
            raise PrometheusError(f"{expr!r} is a {data['resultType']}, not an instant vector")
        result: list[dict[str, Any]] = data["result"]
        return result

    async def rule_groups(self) -> list[dict[str, Any]]:
        """The loaded rule groups with each rule's ``health`` and, for alerts, ``state`` (``/api/v1/rules``)."""
        groups: list[dict[str, Any]] = (await self._api("/api/v1/rules", {}))["groups"]
        return groups

    async def alerts(self) -> list[dict[str, Any]]:
        """The pending and firing alerts (``/api/v1/alerts``)."""
        alerts: list[dict[str, Any]] = (await self._api("/api/v1/alerts", {}))["alerts"]
        return alerts

    async def _api(self, path: str, params: Mapping[str, str]) -> Any:
        async with (
            aiohttp.ClientSession() as http,
            http.get(self.url + path, params=params, timeout=aiohttp.ClientTimeout(total=10)) as response,
        ):
            body = await response.json(content_type=None)
        if body.get("status") != "success":
            raise PrometheusError(f"{path} {dict(params)}: {body.get('errorType')}: {body.get('error')}")
        return body["data"]

    async def _ready(self) -> bool:
        if self._process is not None and (code := self._process.exit_code()) is not None:
            raise PrometheusError(f"prometheus exited with {code}:\n{self.log_tail()}")
        with contextlib.suppress(aiohttp.ClientError):
            async with (
                aiohttp.ClientSession() as http,
                http.get(self.url + "/-/ready", timeout=aiohttp.ClientTimeout(total=2)) as response,
            ):
                return response.status == 200
        return False
