"""Routing that tolerates repeated slashes in a path, answering in place as GitHub's services do.

ARC v0.27.6 builds its acquire-jobs URL by joining the tenant URL, which ends in ``/``, and ``/_apis/...``,
so it asks for ``/tenant/1//_apis/runtime/runnerscalesets/1/acquirejobs``; GitHub serves that. aiohttp's own
``normalize_path_middleware(merge_slashes=True)`` answers with a redirect instead, which a client must follow
(and re-send its POST body to), so the sim resolves such a path here, without a round trip.

A middleware cannot do this: aiohttp resolves the route, and builds the middleware chain around its handler,
before any middleware runs. A resource can: the router asks every resource that may match, and this one,
indexed at ``/``, is asked last, only when no route matched the path as sent.
"""

from __future__ import annotations

import re
from collections.abc import Iterator

from aiohttp import web
from aiohttp.web_urldispatcher import AbstractResource, AbstractRoute, UrlMappingMatchInfo, _InfoDict
from yarl import URL

_REPEATED_SLASHES = re.compile(r"//+")


def tolerate_repeated_slashes(app: web.Application) -> None:
    """Serve a path with repeated slashes (``/a//b``) as the path with each run merged (``/a/b``).

    Call after the application's routes are added. The request keeps the path it was sent with (the request
    log records that); only the route and its match info come from the merged path.
    """
    app.router.register_resource(_MergedSlashes(app.router))


class _MergedSlashes(AbstractResource):
    """Resolves a path with repeated slashes by resolving its merged form against the same router."""

    def __init__(self, router: web.UrlDispatcher) -> None:
        super().__init__()
        self._router = router

    @property
    def canonical(self) -> str:
        # The router indexes resources by their canonical path's leading segments: "/" is visited last.
        return "/"

    async def resolve(self, request: web.Request) -> tuple[UrlMappingMatchInfo | None, set[str]]:
        raw_path = request.rel_url.raw_path
        if "//" not in raw_path:
            return None, set()
        merged = request.clone(rel_url=URL.build(path=_REPEATED_SLASHES.sub("/", raw_path), encoded=True))
        match = await self._router.resolve(merged)
        http_exception = match.http_exception
        if http_exception is None:
            return match, set()
        if isinstance(http_exception, web.HTTPMethodNotAllowed):
            return None, set(http_exception.allowed_methods)
        return None, set()

    def url_for(self, **kwargs: str) -> URL:
        raise NotImplementedError("the merged-slashes resource builds no URLs")

    def add_prefix(self, prefix: str) -> None:
        raise NotImplementedError("the merged-slashes resource is not for sub-applications")

    def get_info(self) -> _InfoDict:
        return {"path": "/"}

    def raw_match(self, path: str) -> bool:
        return False

    def __len__(self) -> int:
        return 0

    def __iter__(self) -> Iterator[AbstractRoute]:
        return iter(())
