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

from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from maigym_ray.errors import ConfigError
from maigym_ray.plugins import Registry, import_spec, read_options

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
    #: checks the pool's settings beyond their types, ``check(pool, options, where)`` with ``options`` the
    #: pool's settings read into :attr:`options` and ``where`` the pool's key path (``env.pools.web``),
    #: raising ConfigError; None: nothing beyond the types.
    check: Callable[[PoolConfig, Any, str], None] | None = None
    #: the kind drives pages of a Chromium browser, so its instances share the node's browser when its
    #: settings say ``browser: shared``; such a kind's settings have ``browser`` and ``executable`` as
    #: WebBackendConfig's do.
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
    """Checks the settings ``pool``'s backend kind reads: its ``options``, read into the kind's settings class,
    then the kind's own check of them."""
    kind = backend_kind(pool.backend)
    options = kind_options(pool, where)
    if kind.check is not None:
        kind.check(pool, options, where)


def kind_options(pool: PoolConfig, where: str = "pool") -> Any:
    """The pool's ``options`` read into its kind's settings class (None for a kind that takes none).

    The read goes through OmegaConf's structured merge, so nested settings become their dataclasses and a value
    of the wrong type is refused: an unknown key or a wrong type is a ConfigError naming its key path under
    ``where``."""
    return read_options(backend_kind(pool.backend).options, pool.options, where, f"backend {pool.backend!r}")


def build_backend(
    pool: PoolConfig, apps: list[str], app_bind: str = "127.0.0.1", node: Any = None
) -> Backend:
    """The backend ``pool.backend`` names, built by its registered kind."""
    backend = backend_kind(pool.backend).build(pool, apps, app_bind, node)
    from maigym_ray.envs.backend import Backend

    if not isinstance(backend, Backend):
        raise ConfigError(f"backend {pool.backend!r} built a {type(backend).__name__}, not a Backend")
    return backend
