"""The package's own device backend kinds, ``web``, ``android`` and ``desktop``: their builders, their settings
classes (a pool's ``options`` is read into one) and the checks of those settings. They are registered through
this package's entry points (pyproject.toml, group ``maigym_ray.backends``) like any plug-in's; the backends'
modules are imported only when an instance is built.
"""

from __future__ import annotations

from dataclasses import replace
from typing import TYPE_CHECKING, Any

from maigym_ray.envs.config import (
    BROWSER_MODES,
    AndroidBackendConfig,
    DesktopBackendConfig,
    PoolConfig,
    WebBackendConfig,
    check_choice,
)
from maigym_ray.envs.registry import BackendKind, kind_options
from maigym_ray.errors import ConfigError

if TYPE_CHECKING:
    from maigym_ray.envs.backend import Backend

#: How a web pool's reset clears the browser (WebBackendConfig.reset).
WEB_RESETS = ("context", "reload", "restart")


def apps_handle(apps: list[str], app_bind: str, node: Any) -> Any:
    """The instance's mocked apps: in the node's AppServer when there is one, else in this process."""
    if node is not None:
        from maigym_ray.envs.remote import RemoteApps

        return RemoteApps(node, apps)
    from maigym_ray.envs.backends.web import LocalApps

    return LocalApps(apps, app_bind)


def web_options(pool: PoolConfig, where: str = "pool") -> WebBackendConfig:
    """A Chromium pool's settings, with ``platform`` the pool's when the settings leave it empty."""
    options = kind_options(pool, where)
    return options if options.platform else replace(options, platform=pool.platform)


def browser_page(options: WebBackendConfig, node: Any) -> Any:
    """The Chromium page of one instance: on the node's shared browser, or a browser of its own."""
    if options.browser == "shared" and node is not None:
        from maigym_ray.envs.remote import RemotePage

        return RemotePage(node, share_context=options.share_context)
    from maigym_ray.envs.backends.page import LocalPage

    return LocalPage(options.executable)


def check_web(pool: PoolConfig, options: WebBackendConfig, where: str, share_context: bool = False) -> None:
    """The settings of a pool whose pages run in Chromium; ``share_context``: the kind may share one browser
    context between a group's instances (pages that keep no cookies or storage)."""
    check_choice(f"{where}.options.browser", options.browser, BROWSER_MODES)
    check_choice(f"{where}.options.reset", options.reset, WEB_RESETS)
    check_choice(f"{where}.options.platform", options.platform or pool.platform, ("web", "mobile_web"))
    if options.share_context and (not share_context or options.reset == "context"):
        raise ConfigError(
            f"{where}.options.share_context is for miniwob pools with reset reload or restart "
            f"(backend {pool.backend!r}, reset {options.reset!r})"
        )
    if options.platform and options.platform != pool.platform:
        raise ConfigError(f"{where}: options.platform {options.platform!r} != platform {pool.platform!r}")


def check_desktop(pool: PoolConfig, options: DesktopBackendConfig, where: str) -> None:
    """The settings of a pool that runs a desktop through the guest agent."""
    from maigym_ray.envs.desktop.provider import DESKTOP_PROVIDERS

    if options.provider not in DESKTOP_PROVIDERS:
        raise ConfigError(f"{where}.options.provider: " + DESKTOP_PROVIDERS.unknown(options.provider))
    if pool.platform != "desktop":
        raise ConfigError(f"{where}: backend {pool.backend} serves platform desktop, not {pool.platform!r}")


def check_android(pool: PoolConfig, options: AndroidBackendConfig, where: str) -> None:
    """The settings of a ReDroid pool."""
    check_choice(f"{where}.options.reset", options.reset, ("recreate", "pm_clear"))
    check_choice(f"{where}.options.network", options.network, ("host", "bridge"))
    check_choice(f"{where}.options.gpu_mode", options.gpu_mode, ("guest", "host", "auto"))
    if pool.platform != "android":
        raise ConfigError(f"{where}: backend android serves platform android, not {pool.platform!r}")


def build_web(pool: PoolConfig, apps: list[str], app_bind: str = "127.0.0.1", node: Any = None) -> Backend:
    """``web``: the mocked apps in a Chromium page (the node's shared browser, or the env's own)."""
    from maigym_ray.envs.backends.web import WebBackend

    options = web_options(pool)
    return WebBackend(options, apps_handle(apps, app_bind, node), browser_page(options, node))


def build_android(
    pool: PoolConfig, apps: list[str], app_bind: str = "127.0.0.1", node: Any = None
) -> Backend:
    """``android``: a ReDroid container over adb."""
    from maigym_ray.envs.backends.android import AndroidBackend

    return AndroidBackend(kind_options(pool), apps_handle(apps, app_bind, node))


def build_desktop(
    pool: PoolConfig, apps: list[str], app_bind: str = "127.0.0.1", node: Any = None
) -> Backend:
    """``desktop``: a desktop through its guest agent (the desktop's Chromium reaches the apps at app_bind)."""
    from maigym_ray.envs.backends.desktop import DesktopBackend
    from maigym_ray.envs.desktop.provider import build_provider

    options = kind_options(pool)
    return DesktopBackend(options, apps_handle(apps, app_bind, node), build_provider(options))


WEB = BackendKind(build=build_web, check=check_web, uses_browser=True, options=WebBackendConfig)
ANDROID = BackendKind(build=build_android, check=check_android, options=AndroidBackendConfig)
DESKTOP = BackendKind(build=build_desktop, check=check_desktop, options=DesktopBackendConfig)
