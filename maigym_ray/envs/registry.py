"""The backend registry: every backend kind a pool may name, through the one plug-in mechanism
(:mod:`maigym_ray.plugins`, entry-point group ``maigym_ray.backends``).

A kind is a :class:`BackendKind`: its builder, ``build(pool, apps, app_bind, node) -> Backend`` (the pool's
config, the mocked apps the instance hosts, the address they bind to, and the node's NodeServices actor, None
when the instance runs everything in its own process), the check of the pool settings it reads, and its own
typed settings class when it has one. An entry point may also name a bare builder.

The package's own kinds (web, android, desktop in envs/kinds.py; miniwob and osworld in suites/; the test
``fake`` in testing/) are declared in its pyproject.toml like a third-party package's, so this module names
none of them. A user's backend is added without editing the package, in any of three ways:

- an installed package's entry point in the group ``maigym_ray.backends`` (``mine = "my_pkg.backends:KIND"``),
  after which pools say ``backend=mine``;
- ``env.pools.<name>.backend="my_pkg.backends:build_mine"``: the builder's class path, registered on use;
- :func:`register_backend` from Python, before the manager starts.

The EnvActor only ever calls :func:`build_backend`; there is no per-kind branch anywhere else.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from maigym_ray.errors import ConfigError
from maigym_ray.plugins import Registry, import_spec

if TYPE_CHECKING:
    from maigym_ray.envs.backend import Backend
    from maigym_ray.envs.config import PoolConfig

#: What a builder is: ``(pool, apps, app_bind, node) -> Backend``.
BackendBuilder = Callable[["PoolConfig", list[str], str, Any], "Backend"]


@dataclass(frozen=True)
class BackendKind:
    """What a backend kind registers."""

    #: ``(pool, apps, app_bind, node) -> Backend``.
    build: BackendBuilder
    #: checks the pool settings this kind reads, ``check(pool, where)`` with ``where`` the pool's key path
    #: (``env.pools.web``), raising ConfigError; None: it reads none beyond the pool's own.
    check: Callable[[PoolConfig, str], None] | None = None
    #: the kind drives pages of a Chromium browser, so its instances share the node's browser when
    #: ``web.browser`` is "shared".
    uses_browser: bool = False
    #: the kind's own settings class (a dataclass), read from the pool's ``options``; None: it takes none.
    options: type | None = None


def _accept(name: str, obj: Any) -> BackendKind:
    if isinstance(obj, BackendKind):
        return obj
    if callable(obj):
        return BackendKind(build=obj)
    raise ConfigError(f"backend {name!r} is a {type(obj).__name__}, not a BackendKind or a builder")


#: Backend kinds by name.
BACKENDS: Registry[BackendKind] = Registry("backends", "backend", _accept)


def register_backend(kind: str, builder: BackendKind | BackendBuilder | str) -> None:
    """Adds backend ``kind`` (a BackendKind, a builder, or its ``"module:attr"``). A kind already taken by
    another is a ConfigError."""
    BACKENDS.register(kind, builder)


def backend_kinds() -> list[str]:
    """Every registered kind (a pool may also name a builder's ``"module:function"``)."""
    return BACKENDS.names()


def backend_kind(kind: str) -> BackendKind:
    """The registered kind, or a builder's ``"module:function"`` registered on use; ConfigError listing the
    registered kinds otherwise."""
    if kind not in BACKENDS and ":" in kind:
        BACKENDS.register(kind, _accept(kind, import_spec(kind, "backend")))
    return BACKENDS.load(kind)


def check_backend(kind: str) -> None:
    """Raises ConfigError unless ``kind`` is registered or is an importable ``"module:function"``."""
    backend_kind(kind)


def check_pool(pool: PoolConfig, where: str) -> None:
    """Checks the settings ``pool``'s backend kind reads (its kind's check, its typed ``options``)."""
    kind = backend_kind(pool.backend)
    kind_options(pool, where)
    if kind.check is not None:
        kind.check(pool, where)


def kind_options(pool: PoolConfig, where: str = "pool") -> Any:
    """The pool's ``options`` read into its kind's settings class (None for a kind that takes none); an unknown
    key is a ConfigError naming it and the kind's settings."""
    cls = backend_kind(pool.backend).options
    if cls is None:
        if pool.options:
            raise ConfigError(f"{where}.options: backend {pool.backend!r} takes no options")
        return None
    names = [f.name for f in dataclasses.fields(cls)]
    unknown = sorted(set(pool.options) - set(names))
    if unknown:
        raise ConfigError(
            f"{where}.options.{unknown[0]} is not a setting of backend {pool.backend!r}; "
            f"its settings: {', '.join(names)}"
        )
    try:
        return cls(**pool.options)
    except (TypeError, ValueError) as exc:
        raise ConfigError(f"{where}.options: {exc}") from exc


def build_backend(
    pool: PoolConfig, apps: list[str], app_bind: str = "127.0.0.1", node: Any = None
) -> Backend:
    """The backend ``pool.backend`` names, built by its registered kind."""
    backend = backend_kind(pool.backend).build(pool, apps, app_bind, node)
    from maigym_ray.envs.backend import Backend

    if not isinstance(backend, Backend):
        raise ConfigError(f"backend {pool.backend!r} built a {type(backend).__name__}, not a Backend")
    return backend
