"""GitHub and the Actions service: config URL, credentials, the async client, typed errors, a client pool.

The public face; everything a controller or the listener needs is importable from here::

    config = parse_config_url("https://github.com/my-org", environ=os.environ)
    credentials = credentials_from_fields(app_config)  # chosen by arc_scaleset.api.credentials' rule
    async with ActionsClient(config, credentials, system_info=SystemInfo(subsystem="controller")) as client:
        scale_set = await client.get_runner_scale_set(runner_group_id=1, name="arc-runners")
"""

from arc_scaleset.github._transport import SharedSessions
from arc_scaleset.github.actions_client import API_VERSION, ActionsClient
from arc_scaleset.github.config_url import GitHubConfig, GitHubScope, InvalidConfigURL, parse_config_url
from arc_scaleset.github.credentials import (
    Credentials,
    GitHubApp,
    InvalidCredentials,
    PersonalAccessToken,
    credentials_from_fields,
    fingerprint_of_fields,
)
from arc_scaleset.github.errors import (
    ActionsError,
    AuthenticationStepFailed,
    FatalError,
    GitHubError,
    JobStillRunning,
    MessageQueueTokenExpired,
    NotFound,
    RateLimited,
    ResponseTooLarge,
    RunnerExists,
    RunnerNotFound,
    SessionConflict,
    SessionNotFound,
    TransientError,
    Unauthorized,
    is_transient,
)
from arc_scaleset.github.models import (
    AcquirableJob,
    JitConfig,
    JobAssigned,
    JobAvailable,
    JobCompleted,
    JobMessage,
    JobStarted,
    Label,
    Message,
    MessageSession,
    RunnerGroup,
    RunnerReference,
    RunnerScaleSet,
    RunnerSetting,
    Statistics,
)
from arc_scaleset.github.pool import ActionsClientPool, ClientKey
from arc_scaleset.github.proxy import ProxySettings
from arc_scaleset.github.system_info import SystemInfo
from arc_scaleset.github.transport_options import TransportOptions

__all__ = [
    "API_VERSION",
    "AcquirableJob",
    "ActionsClient",
    "ActionsClientPool",
    "ActionsError",
    "AuthenticationStepFailed",
    "ClientKey",
    "Credentials",
    "FatalError",
    "GitHubApp",
    "GitHubConfig",
    "GitHubError",
    "GitHubScope",
    "InvalidConfigURL",
    "InvalidCredentials",
    "JitConfig",
    "JobAssigned",
    "JobAvailable",
    "JobCompleted",
    "JobMessage",
    "JobStarted",
    "JobStillRunning",
    "Label",
    "Message",
    "MessageQueueTokenExpired",
    "MessageSession",
    "NotFound",
    "PersonalAccessToken",
    "ProxySettings",
    "RateLimited",
    "ResponseTooLarge",
    "RunnerExists",
    "RunnerGroup",
    "RunnerNotFound",
    "RunnerReference",
    "RunnerScaleSet",
    "RunnerSetting",
    "SessionConflict",
    "SessionNotFound",
    "SharedSessions",
    "Statistics",
    "SystemInfo",
    "TransientError",
    "TransportOptions",
    "Unauthorized",
    "credentials_from_fields",
    "fingerprint_of_fields",
    "is_transient",
    "parse_config_url",
]
