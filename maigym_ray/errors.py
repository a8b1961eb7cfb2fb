"""One error hierarchy for the whole platform.

Agent mistakes (a malformed action, a click on a missing element) are *observations*, not exceptions that leave
the environment layer. Infrastructure failures (a crashed browser, a dead actor, a timeout) are typed exceptions
so the manager can replace the instance and the episode can be retried or flagged, never silently scored 0.
"""

from __future__ import annotations


class MaigymError(Exception):
    """Base class of every error raised by maigym_ray."""


class ConfigError(MaigymError, ValueError):
    """A configuration value is unknown or invalid; the message lists the valid choices. A ValueError too, so
    code that validated configs before this class existed still catches it."""


class TaskError(MaigymError):
    """A task is unknown, malformed, or its verifier could not be evaluated."""


class ActionParseError(MaigymError):
    """Model output does not parse in the action grammar. The message is written for the model to read."""


class ContextOverflowError(MaigymError):
    """A prompt no longer fits the model's context: the episode ends there and is scored as it stands."""


class UnsupportedActionError(MaigymError):
    """A well-formed action that the platform of this environment does not support."""


class InfraError(MaigymError):
    """An infrastructure failure: the episode must be retried or reported as infra-failed, never scored."""


class BackendError(InfraError):
    """The backend (browser, container, VM) failed or became unhealthy."""


class EnvTimeoutError(InfraError):
    """An environment operation exceeded its time limit."""


class EnvUnavailableError(InfraError):
    """No healthy instance could be leased, or a lease points at an instance that is gone."""


class LeaseError(MaigymError):
    """A lease id is unknown or was already released (a caller bug, not an infrastructure failure)."""


class AppError(MaigymError):
    """A mocked app rejected a seed or a control request."""


class SpecError(ConfigError):
    """An app spec is invalid: names the spec file, the JSON path inside it and the rule it breaks, so a bad spec
    fails when it is loaded and never as a broken screen later."""

    def __init__(self, file: str, path: str, rule: str) -> None:
        self.file, self.path, self.rule = file, path, rule
        super().__init__(f"app spec {file}: at {path}: {rule}")
