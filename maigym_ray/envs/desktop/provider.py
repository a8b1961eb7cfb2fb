"""The DesktopProvider ABC: what brings one desktop up, resets it and tears it down.

A provider owns the desktop's lifecycle only. Everything that happens *inside* the desktop (screenshots,
input, the accessibility tree, exec, files) goes through the guest agent's HTTP API, whose address and token
the provider returns as an :class:`AgentEndpoint`. So the desktop backend is the same for every provider:
``xvfb`` (an X display on this node) and ``libvirt`` (a VM whose agent runs in the guest).
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from maigym_ray.errors import ConfigError
from maigym_ray.plugins import Registry

if TYPE_CHECKING:
    from maigym_ray.envs.config import DesktopBackendConfig


@dataclass(frozen=True)
class AgentEndpoint:
    """Where the guest agent of one desktop listens, and the token it requires."""

    #: base URL of the agent, e.g. ``http://127.0.0.1:40123``.
    url: str
    #: bearer token; the agent answers 401 to any request without it.
    token: str


class DesktopProvider(ABC):
    """Brings up one desktop with the guest agent running inside it.

    Infrastructure failures raise :class:`~maigym_ray.errors.BackendError`; ``health`` and ``close`` never raise.
    """

    @abstractmethod
    async def start(self) -> AgentEndpoint:
        """Brings the desktop up (idempotent) and returns its agent's endpoint once the agent answers."""

    @abstractmethod
    async def reset(self) -> AgentEndpoint:
        """Restores the desktop's initial state (xvfb: kill the session, restore home from the template;
        libvirt: revert the clean snapshot) and returns the agent's endpoint, which may have changed."""

    @abstractmethod
    async def health(self) -> bool:
        """True when the desktop (display server or VM) is alive; never raises."""

    @abstractmethod
    async def close(self) -> None:
        """Tears the desktop down and frees every process, file and domain (idempotent, never raises)."""


#: What a desktop provider kind registers: ``build(desktop_config) -> DesktopProvider``.
ProviderBuilder = Callable[["DesktopBackendConfig"], DesktopProvider]


def _accept(name: str, obj: Any) -> ProviderBuilder:
    if not callable(obj):
        raise ConfigError(f"desktop provider {name!r} is a {type(obj).__name__}, not a builder")
    return obj  # type: ignore[no-any-return]


#: Desktop providers by name (entry-point group ``maigym_ray.desktop_providers``): xvfb and libvirt, and any a
#: package adds.
DESKTOP_PROVIDERS: Registry[ProviderBuilder] = Registry("desktop_providers", "desktop provider", _accept)


def build_provider(cfg: DesktopBackendConfig) -> DesktopProvider:
    """The provider ``cfg.provider`` names, built by its registered builder (imported only when asked for)."""
    provider = DESKTOP_PROVIDERS.load(cfg.provider)(cfg)
    if not isinstance(provider, DesktopProvider):
        raise ConfigError(
            f"desktop provider {cfg.provider!r} built a {type(provider).__name__}, not a DesktopProvider"
        )
    return provider
