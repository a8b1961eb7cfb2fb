"""The backend registry: every backend kind a pool may name, and the one place to add one.

A backend kind maps to a *builder*, ``build(pool, apps, app_bind, node) -> Backend``: the pool's config, the
mocked apps the instance hosts, the address they bind to, and the node's NodeServices actor (None when the
instance runs everything in its own process). Builders are given as ``"module:function"`` strings and
imported only in the env actor that uses them, so a kind costs nothing (no Playwright, no docker SDK) until a
pool asks for it.

A user's backend is added without editing the package, in any of three ways:

- ``env.pools.<name>.backend="my_pkg.backends:build_mine"``: the builder's class path, registered on use;
- an installed package's entry point in the group ``maigym_ray.backends`` (``mine = "my_pkg.backends:build"``),
  after which pools say ``backend=mine``;
- :func:`register_backend` from Python, before the manager starts.

The package's own test double, the ``fake`` kind (maigym_ray/testing/fake_backend.py), comes in the second way,
through this package's entry point: production code never imports the fakes.

The EnvActor only ever calls :func:`build_backend`; there is no per-kind branch anywhere else.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from maigym_ray.errors import ConfigError

if TYPE_CHECKING:
    from maigym_ray.envs.backend import Backend
    from maigym_ray.envs.config import PoolConfig

#: What a builder is: ``(pool, apps, app_bind, node) -> Backend``.
BackendBuilder = Callable[["PoolConfig", list[str], str, Any], "Backend"]

#: The entry-point group through which an installed package adds backend kinds.
ENTRY_POINT_GROUP = "maigym_ray.backends"


def apps_handle(apps: list[str], app_bind: str, node: Any) -> Any:
    """The instance's mocked apps: in the node's AppServer when there is one, else in this process."""
    if node is not None:
        from maigym_ray.envs.remote import RemoteApps

        return RemoteApps(node, apps)
    from maigym_ray.envs.backends.web import LocalApps

    return LocalApps(apps, app_bind)


def build_web(pool: PoolConfig, apps: list[str], app_bind: str = "127.0.0.1", node: Any = None) -> Backend:
    """``web``: the mocked apps in a Chromium page (the node's shared browser, or the env's own)."""
    from maigym_ray.envs.backends.web import WebBackend

    if pool.web.browser == "shared" and node is not None:
        from maigym_ray.envs.remote import RemotePage

        page: Any = RemotePage(node)
    else:
        from maigym_ray.envs.backends.page import LocalPage

        page = LocalPage(pool.web.executable)
    return WebBackend(pool.web, apps_handle(apps, app_bind, node), page)


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
    from maigym_ray.envs.backends.desktop import DesktopBackend, build_provider

    return DesktopBackend(pool.desktop, apps_handle(apps, app_bind, node), build_provider(pool.desktop))


#: Backend kinds by name: a builder, or its ``"module:function"`` (imported on first use).
BACKENDS: dict[str, BackendBuilder | str] = {
    "web": build_web,
    "android": build_android,
    "desktop": build_desktop,
    "miniwob": "maigym_ray.suites.miniwob:build_backend",
    "osworld": "maigym_ray.suites.osworld:build_backend",
}


def _import(spec: str) -> BackendBuilder:
    module, _, attr = spec.partition(":")
    try:
        fn = getattr(importlib.import_module(module), attr)
    except (ImportError, AttributeError, ValueError) as exc:
        raise ConfigError(f"backend {spec!r}: cannot import it ({exc}); give 'module.path:function'") from exc
    if not callable(fn):
        raise ConfigError(f"backend {spec!r} is not callable")
    return fn  # type: ignore[no-any-return]


def register_backend(kind: str, builder: BackendBuilder | str) -> None:
    """Adds backend ``kind`` (a builder or its ``"module:function"``). A kind already taken by another
    builder is a ConfigError: two packages claiming one name must not silently replace each other."""
    known = BACKENDS.get(kind)
    if known is not None and known != builder:
        raise ConfigError(f"backend kind {kind!r} is taken (by {known!r})")
    BACKENDS[kind] = builder


def _register_entry_points() -> None:
    from importlib.metadata import entry_points

    for ep in entry_points(group=ENTRY_POINT_GROUP):
        register_backend(ep.name, ep.value)


_register_entry_points()


def backend_kinds() -> list[str]:
    """Every registered kind (a pool may also name a builder's ``"module:function"``)."""
    return list(BACKENDS)


def check_backend(kind: str) -> None:
    """Raises ConfigError unless ``kind`` is registered or is an importable ``"module:function"``."""
    if kind in BACKENDS:
        return
    if ":" in kind:
        _import(kind)
        return
    raise ConfigError(
        f"backend {kind!r} is not available; available: {', '.join(BACKENDS)} "
        "(or a builder's 'module.path:function', docs/plugins/backends.md)"
    )


def build_backend(
    pool: PoolConfig, apps: list[str], app_bind: str = "127.0.0.1", node: Any = None
) -> Backend:
    """The backend ``pool.backend`` names, built by its registered builder."""
    check_backend(pool.backend)
    entry = BACKENDS.get(pool.backend, pool.backend)
    builder = _import(entry) if isinstance(entry, str) else entry
    backend = builder(pool, apps, app_bind, node)
    from maigym_ray.envs.backend import Backend

    if not isinstance(backend, Backend):
        raise ConfigError(f"backend {pool.backend!r} built a {type(backend).__name__}, not a Backend")
    return backend
