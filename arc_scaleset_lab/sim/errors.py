"""Errors the simulated service answers with, in the two JSON dialects it speaks.

The Actions service answers ``{"typeName": "<dotted>.XxxException", "message": ...}``; the GitHub REST API
answers ``{"message": ..., "documentation_url": ...}``. The state model raises these; the route layer turns
them into responses, so the pure model never touches HTTP.
"""

from __future__ import annotations

_WEBAPI = "GitHub.DistributedTask.WebApi."


class ActionsError(Exception):
    """An Actions-service error: HTTP ``status`` with body ``{"typeName", "message"}``."""

    def __init__(self, status: int, type_name: str, message: str) -> None:
        super().__init__(f"{status} {type_name}: {message}")
        self.status = status
        self.type_name = type_name
        self.message = message

    def body(self) -> dict[str, str]:
        return {"typeName": self.type_name, "message": self.message}


class GitHubError(Exception):
    """A GitHub REST error: HTTP ``status`` with body ``{"message", "documentation_url"}``."""

    def __init__(self, status: int, message: str) -> None:
        super().__init__(f"{status} {message}")
        self.status = status
        self.message = message

    def body(self) -> dict[str, str]:
        return {"message": self.message, "documentation_url": "https://docs.github.com/rest"}


def agent_exists(name: str) -> ActionsError:
    return ActionsError(409, _WEBAPI + "AgentExistsException", f"A runner with the name {name} already exists.")


def agent_not_found(runner: int | str) -> ActionsError:
    return ActionsError(404, _WEBAPI + "AgentNotFoundException", f"No runner was found with ID or name {runner}.")


def job_still_running(name: str) -> ActionsError:
    return ActionsError(
        400, _WEBAPI + "JobStillRunningException", f"The runner {name} is running a job and cannot be removed."
    )


def scale_set_not_found(scale_set: int | str) -> ActionsError:
    return ActionsError(404, _WEBAPI + "RunnerScaleSetNotFoundException", f"No runner scale set {scale_set} exists.")


def scale_set_exists(name: str) -> ActionsError:
    return ActionsError(
        409, _WEBAPI + "RunnerScaleSetExistsException", f"A runner scale set named {name} already exists."
    )


def session_conflict(scale_set_id: int, owner: str) -> ActionsError:
    return ActionsError(
        409,
        _WEBAPI + "TaskAgentSessionConflictException",
        f"A session for runner scale set {scale_set_id} is already held by {owner}.",
    )


def session_not_found(session_id: str) -> ActionsError:
    return ActionsError(
        404, _WEBAPI + "TaskAgentSessionExpiredException", f"The session {session_id} has expired or does not exist."
    )


def runner_group_not_found(group: int | str) -> ActionsError:
    return ActionsError(404, _WEBAPI + "RunnerGroupNotFoundException", f"No runner group {group} exists.")


def unauthorized(what: str) -> ActionsError:
    return ActionsError(401, "Microsoft.VisualStudio.Services.Common.VssUnauthorizedException", what)


def bad_request(message: str) -> ActionsError:
    return ActionsError(400, "System.ArgumentException", message)
