"""The package's own device backend kinds, ``web``, ``android`` and ``desktop``: their builders and the checks of
the pool settings each reads. They are registered through this package's entry points (pyproject.toml, group
``maigym_ray.backends``) like any plug-in's; the backends' modules are imported only when an instance is built.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from maigym_ray.envs.config import BROWSER_MODES, PoolConfig, check_choice
from maigym_ray.envs.registry import BackendKind
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


def browser_page(pool: PoolConfig, node: Any) -> Any:
    """The Chromium page of one instance: on the node's shared browser, or a browser of its own."""
    if pool.web.browser == "shared" and node is not None:
        from maigym_ray.envs.remote import RemotePage

        return RemotePage(node)
    from maigym_ray.envs.backends.page import LocalPage

    return LocalPage(pool.web.executable)


def check_web(pool: PoolConfig, where: str, share_context: bool = False) -> None:
    """The web settings of a pool whose pages run in Chromium; ``share_context``: the kind may share one
    browser context between a group's instances (pages that keep no cookies or storage)."""
    check_choice(f"{where}.web.browser", pool.web.browser, BROWSER_MODES)
    check_choice(f"{where}.web.reset", pool.web.reset, WEB_RESETS)
    check_choice(f"{where}.web.platform", pool.web.platform, ("web", "mobile_web"))
    if pool.web.share_context and (not share_context or pool.web.reset == "context"):
        raise ConfigError(
            f"{where}.web.share_context is for miniwob pools with reset reload or restart "
            f"(backend {pool.backend!r}, reset {pool.web.reset!r})"
        )
    if pool.web.platform != pool.platform:
        raise ConfigError(f"{where}: web.platform {pool.web.platform!r} != platform {pool.platform!r}")


def check_desktop(pool: PoolConfig, where: str) -> None:
    """The desktop settings of a pool that runs a desktop through the guest agent."""
    from maigym_ray.envs.desktop.provider import DESKTOP_PROVIDERS

    if pool.desktop.provider not in DESKTOP_PROVIDERS:
        raise ConfigError(f"{where}.desktop.provider: " + DESKTOP_PROVIDERS.unknown(pool.desktop.provider))
    if pool.platform != "desktop":
        raise ConfigError(f"{where}: backend {pool.backend} serves platform desktop, not {pool.platform!r}")


def check_android(pool: PoolConfig, where: str) -> None:
    """The android settings of a ReDroid pool."""
    check_choice(f"{where}.android.reset", pool.android.reset, ("recreate", "pm_clear"))
    check_choice(f"{where}.android.network", pool.android.network, ("host", "bridge"))
    check_choice(f"{where}.android.gpu_mode", pool.android.gpu_mode, ("guest", "host", "auto"))
    if pool.platform != "android":
        raise ConfigError(f"{where}: backend android serves platform android, not {pool.platform!r}")


def build_web(pool: PoolConfig, apps: list[str], app_bind: str = "127.0.0.1", node: Any = None) -> Backend:
    """``web``: the mocked apps in a Chromium page (the node's shared browser, or the env's own)."""
    from maigym_ray.envs.backends.web import WebBackend

    return WebBackend(pool.web, apps_handle(apps, app_bind, node), browser_page(pool, node))


def build_android(
    pool: PoolConfig, apps: list[str], app_bind: str = "127.0.0.1", node: Any = None
) -> Backend:
    """``android``: a ReDroid container over adb."""
    from maigym_ray.envs.backends.android import AndroidBackend

    return AndroidBackend(pool.android, apps_handle(apps, app_bind, node))


def build_desktop(
    pool: PoolConfig, apps: list[str], app_bind: str = "127.0.0.1", node: Any = None
) -> Backend:
    """``desktop``: a desktop through its guest agent (the desktop's Chromium reaches the apps at app_bind)."""
    from maigym_ray.envs.backends.desktop import DesktopBackend
    from maigym_ray.envs.desktop.provider import build_provider

    return DesktopBackend(pool.desktop, apps_handle(apps, app_bind, node), build_provider(pool.desktop))


WEB = BackendKind(build=build_web, check=check_web, uses_browser=True)
ANDROID = BackendKind(build=build_android, check=check_android)
DESKTOP = BackendKind(build=build_desktop, check=check_desktop)
