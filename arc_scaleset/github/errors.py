"""Typed errors of the GitHub / Actions-service client: callers branch on the class, never on the text.

Every error that comes from an HTTP exchange is an :class:`ActionsError` whose message is one line::

    request GET https://host/_apis/runtime/runnerscalesets?api-version=6.0-preview&name=x failed(
        status="404 Not Found", activity_id="...", github_request_id="..."): <detail>

(on one line). Query values that might be secret are masked, and the detail text is scrubbed of every
credential the client holds and of anything credential-shaped (the process-wide
:func:`~arc_scaleset.observability.logging.redact`, applied here whoever builds the error), so an error can be
logged, put in a Kubernetes Event or a status condition.

Reactions, by class:

- :class:`TransientError`, :class:`RateLimited`, :class:`SessionConflict`: try again later
  (:func:`is_transient` says so; ``RateLimited.retry_after`` says when). A 2xx answer that cannot be used
  (no message session, no token, not a JSON object: a proxy's page, a truncated body) is a TransientError
  too: the service accepted the request, and asking again may get a good answer.
- :class:`Unauthorized`: the credentials were refreshed once and still failed: fix the secret.
  :class:`AuthenticationStepFailed` (one of them): a step of the authentication chain answered 404 or 403;
  never read it as "not found" of what the call was about.
- :class:`NotFound` (and :class:`RunnerNotFound`, :class:`SessionNotFound`): the thing is gone; re-create
  or forget it.
- :class:`RunnerExists`, :class:`JobStillRunning`: specific conflicts with documented reactions.
- :class:`FatalError`: a request that will not succeed by repeating it (bad request, TLS verification, a
  response body over the client's size limit: :class:`ResponseTooLarge`). The listener exits on one when
  creating its message session; the controllers retry it with backoff like any other.
"""

from __future__ import annotations

import datetime as dt
from typing import Any
from urllib.parse import parse_qsl, urlencode, urlsplit, urlunsplit

from arc_scaleset.observability.logging import redact

# Query parameters whose values are shown verbatim in error messages; any other value is masked.
_VISIBLE_QUERY_KEYS = frozenset(
    {"api-version", "name", "runnerGroupId", "groupName", "agentName", "lastMessageId", "per_page", "page"}
)


def redact_url(url: str) -> str:
    """``url`` without user info, with the values of unknown query parameters replaced by ``***``."""
    try:
        parts = urlsplit(url)
    except ValueError:
        return "<unparsable URL>"
    netloc = parts.netloc.rpartition("@")[2]
    query = parts.query
    if query:
        pairs = [(k, v if k in _VISIBLE_QUERY_KEYS else "***") for k, v in parse_qsl(query, keep_blank_values=True)]
        query = urlencode(pairs, safe="*")
    return urlunsplit((parts.scheme, netloc, parts.path, query, ""))


class GitHubError(Exception):
    """Base of every error this package raises about GitHub (configuration, credentials, HTTP)."""


class ActionsError(GitHubError):
    """A request to GitHub or the Actions service failed.

    Attributes are safe to log: ``url`` is already redacted, ``detail`` already scrubbed.
    """

    def __init__(
        self,
        *,
        method: str,
        url: str,
        status: int | None = None,
        reason: str = "",
        detail: str = "",
        activity_id: str | None = None,
        github_request_id: str | None = None,
        type_name: str | None = None,
        server_date: dt.datetime | None = None,
    ) -> None:
        self.method = method
        self.url = redact_url(url)
        self.status = status
        self.reason = reason
        self.detail = " ".join(redact(detail).split())  # one line, whatever the body looked like
        self.activity_id = activity_id
        self.github_request_id = github_request_id
        self.type_name = type_name
        self.server_date = server_date  # the answer's Date header: the server's clock (App JWT clock skew)
        super().__init__(self._format())

    def facts(self) -> dict[str, Any]:
        """The keyword arguments that rebuild this error, but for ``detail`` (to reword it, or to say it again
        as another class)."""
        return {
            "method": self.method,
            "url": self.url,
            "status": self.status,
            "reason": self.reason,
            "activity_id": self.activity_id,
            "github_request_id": self.github_request_id,
            "type_name": self.type_name,
            "server_date": self.server_date,
        }

    def _format(self) -> str:
        head = f"request {self.method} {self.url} failed"
        if self.status is None:
            return f"{head}: {self.detail or 'unknown error'}"
        status = f"{self.status} {self.reason}".strip()
        fields = [f'status="{status}"']
        if self.activity_id:
            fields.append(f'activity_id="{self.activity_id}"')
        if self.github_request_id:
            fields.append(f'github_request_id="{self.github_request_id}"')
        return f"{head}({', '.join(fields)}): {self.detail or 'unknown error'}"


class NotFound(ActionsError):  # noqa: N818 - the names callers branch on
    """404, or the service said the named object does not exist (e.g. ``RunnerScaleSetNotFoundException``)."""


class RunnerNotFound(NotFound):
    """The runner (agent) does not exist (``AgentNotFoundException``)."""


class SessionNotFound(NotFound):
    """The message session is gone (evicted or expired on the service side): create a new one."""


class RunnerExists(ActionsError):  # noqa: N818 - the names callers branch on
    """A runner with that name is already registered (``AgentExistsException``, JIT name collision)."""


class JobStillRunning(ActionsError):  # noqa: N818 - the names callers branch on
    """The runner cannot be removed while it runs a job (``JobStillRunningException``)."""


class SessionConflict(ActionsError):  # noqa: N818 - the names callers branch on
    """409 on creating a message session: another (possibly stale) session holds the scale set.

    Transient: the service expires an abandoned session, so retry with backoff.
    """


class Unauthorized(ActionsError):  # noqa: N818 - the names callers branch on
    """401 (or an auth 403) that survived one credential refresh: the credentials are wrong or revoked."""


class AuthenticationStepFailed(Unauthorized):
    """GitHub refused a step of the authentication chain (docs/github.md): 404 or 403 on the App's
    installation-token, the registration-token or the runner-registration request.

    A configuration error, never an answer about a runner or a scale set: the credentials cannot administer
    the configured enterprise, organization or repository (a PAT that lost its access, an App not installed
    there) or the config URL does not name GitHub's API. Before this class, such a 404 read as
    :class:`NotFound` to the caller of a runner's removal, which took it for "the runner is already gone" and
    deleted the runner without asking whether it ran a job. ``step`` names the request that failed.
    """

    def __init__(self, *, step: str, **kwargs: object) -> None:
        self.step = step
        super().__init__(**kwargs)  # type: ignore[arg-type]


class MessageQueueTokenExpired(Unauthorized):
    """401 from the message queue that survived one session refresh."""


class RateLimited(ActionsError):  # noqa: N818 - the names callers branch on
    """429, or 403 with ``x-ratelimit-remaining: 0``. ``retry_after`` (seconds) is when to try again, if known."""

    def __init__(self, *, retry_after: float | None, **kwargs: object) -> None:
        self.retry_after = retry_after
        super().__init__(**kwargs)  # type: ignore[arg-type]


class TransientError(ActionsError):
    """5xx (except 501), connection errors and timeouts that outlasted the client's bounded retries; and a 2xx
    answer that cannot be used: a message session or a step of the authentication chain without what it is for
    (its detail names what was wrong, never quoting the body)."""


class FatalError(ActionsError):
    """A failure that repeating the same request will not heal: most 4xx, 501, TLS verification errors."""


class ResponseTooLarge(FatalError):  # noqa: N818 - the names callers branch on
    """The response body exceeded the client's limit (``limit`` bytes, 10 MiB by default) and was not read."""

    def __init__(self, *, limit: int, **kwargs: object) -> None:
        self.limit = limit
        super().__init__(**kwargs)  # type: ignore[arg-type]


class UnreadableMessage(ActionsError):  # noqa: N818 - the names callers branch on
    """A queue message whose ID could be read but whose content could not: acknowledge it and skip it.

    ``message_id`` is that ID, ``skip_reason`` a short label (``unsupported_message_type``,
    ``unparsable_body``, ``body_not_a_list_of_objects``, ``invalid_fields``). A message without a readable ID
    is a :class:`TransientError` instead: there is nothing to acknowledge.
    """

    def __init__(self, *, message_id: int, skip_reason: str, **kwargs: object) -> None:
        self.message_id = message_id
        self.skip_reason = skip_reason
        super().__init__(**kwargs)  # type: ignore[arg-type]


def is_transient(exc: BaseException) -> bool:
    """Whether trying the same operation again later may succeed without anyone changing anything."""
    return isinstance(exc, TransientError | RateLimited | SessionConflict)
