"""One plug-in mechanism for every extensible kind: backends, policies, trainer strategies, pool sources, chat
formats, verifiers, apps, desktop providers and suites' golden scripts.

Each kind is a :class:`Registry`: names mapped to objects, filled from the entry points of the group
``maigym_ray.<kind>``. The package declares its own plug-ins in its ``pyproject.toml`` exactly as a
third-party package declares its: one way in, for built-ins and plug-ins alike, and the package's lower layers
never name the modules that implement a kind (the entry point's ``"module:attr"`` lives in the package
metadata, not in code). An entry point is imported on first use, so a kind costs nothing (no Playwright, no
docker SDK) until a config names it.

From a source checkout, this package's own entry points are read from the ``pyproject.toml`` beside it rather
than from its installed metadata: an editable install's metadata is as old as its last ``pip install``, and a
checkout run through ``PYTHONPATH`` may not be the one installed. Every other distribution's come from
``importlib.metadata``.

An unknown name is a :class:`~maigym_ray.errors.ConfigError` that lists the registered ones.
"""

from __future__ import annotations

import contextlib
import dataclasses
import importlib
import re
import sys
import tomllib
from collections.abc import Callable, Iterator, Mapping
from functools import cache
from importlib import metadata
from pathlib import Path
from typing import Any, Generic, TypeVar

from maigym_ray.errors import ConfigError

T = TypeVar("T")

#: The distribution that ships this module, and the prefix of every entry-point group it reads.
PACKAGE = "maigym_ray"

#: Where a plug-in author reads how to write one.
DOCS = "docs/plugins/index.md"


def _dist_key(name: str) -> str:
    return re.sub(r"[-_.]+", "_", name).lower()


@cache
def _source_entry_points() -> dict[str, dict[str, str]] | None:
    """This package's entry points from the ``pyproject.toml`` of the checkout it runs from; None when it runs
    from an installed wheel (no such file beside it)."""
    path = Path(__file__).resolve().parent.parent / "pyproject.toml"
    try:
        project = tomllib.loads(path.read_text()).get("project", {})
    except (OSError, tomllib.TOMLDecodeError):
        return None
    if _dist_key(str(project.get("name", ""))) != PACKAGE:
        return None
    return {group: dict(eps) for group, eps in project.get("entry-points", {}).items()}


def declared(group: str) -> list[tuple[str, str, str]]:
    """``(name, "module:attr", distribution)`` of every entry point in ``group``: this package's own first (in
    the order its pyproject.toml lists them), then every other installed distribution's."""
    own = _source_entry_points()
    found = [(name, value, PACKAGE) for name, value in (own or {}).get(group, {}).items()]
    for ep in metadata.entry_points(group=group):
        dist = ep.dist.name if ep.dist is not None else "?"
        if own is not None and _dist_key(dist) == PACKAGE:
            continue  # this checkout's pyproject.toml wins over an older install's metadata
        found.append((ep.name, ep.value, dist))
    return found


def import_spec(spec: str, what: str) -> Any:
    """The object a ``"module.path:attr"`` string names; a ConfigError saying why when it cannot be imported."""
    module, colon, attr = spec.partition(":")
    if not colon or not module or not attr:
        raise ConfigError(f"{what} {spec!r}: give 'module.path:attr'")
    try:
        obj: Any = importlib.import_module(module)
        for part in attr.split("."):
            obj = getattr(obj, part)
    except (ImportError, AttributeError, ValueError) as exc:
        raise ConfigError(f"{what} {spec!r}: cannot import it ({exc}); give 'module.path:attr'") from exc
    return obj


def _same(a: Any, b: Any) -> bool:
    """Whether two registrations (objects or ``"module:attr"`` strings) name one object."""
    if a == b:
        return True
    try:
        a, b = (import_spec(x, "plug-in") if isinstance(x, str) else x for x in (a, b))
    except ConfigError:
        return False
    return a is b


class Registry(Mapping[str, T], Generic[T]):
    """The plug-ins of one kind, by name, filled from the entry-point group ``maigym_ray.<kind>``.

    A read-only mapping (``name in reg``, ``reg[name]``, ``list(reg)``) whose values are imported on first
    access; :meth:`register` adds one from Python. ``accept(name, obj)`` checks (and may wrap) what an entry
    point names, raising ConfigError when it is not a plug-in of this kind.
    """

    def __init__(self, kind: str, what: str, accept: Callable[[str, Any], T] | None = None) -> None:
        #: the kind, e.g. "backends"; its entry-point group is ``maigym_ray.<kind>``.
        self.kind = kind
        self.group = f"{PACKAGE}.{kind}"
        #: how messages name one, e.g. "backend".
        self.what = what
        self._accept = accept
        self._specs: dict[str, Any] = {}  # name -> the object, or its "module:attr" (imported on first use)
        self._loaded: dict[str, T] = {}
        self._scanned_path: tuple[str, ...] | None = None  # sys.path at the last scan of the entry points

    # -- filling ----------------------------------------------------------------------------------------------
    def _scan(self, force: bool = False) -> None:
        path = tuple(sys.path)
        if self._scanned_path == path and not force:
            return
        self._scanned_path = path
        for name, value, dist in declared(self.group):
            self._add(name, value, f"{dist}'s entry point {value!r}")

    def _add(self, name: str, obj: Any, origin: str) -> None:
        if name in self._specs and not _same(self._specs[name], obj):
            raise ConfigError(
                f"{self.what} {name!r} is taken (by {self._specs[name]!r}); {origin} cannot claim it"
            )
        self._specs.setdefault(name, obj)

    def register(self, name: str, obj: Any) -> None:
        """Adds ``name`` (the object, or its ``"module:attr"``). A name taken by another object is a
        ConfigError: two packages claiming one name must not silently replace each other."""
        self._scan()
        self._add(name, obj, repr(obj))

    def unregister(self, name: str) -> None:
        """Removes ``name`` (tests; a scan of the entry points adds a declared one back)."""
        self._specs.pop(name, None)
        self._loaded.pop(name, None)

    @contextlib.contextmanager
    def isolated(self) -> Iterator[Registry[T]]:
        """Registrations made inside the block, and entry points scanned in it, are undone after it (tests)."""
        specs, loaded, scanned = dict(self._specs), dict(self._loaded), self._scanned_path
        try:
            yield self
        finally:
            self._specs, self._loaded, self._scanned_path = specs, loaded, scanned

    # -- reading ----------------------------------------------------------------------------------------------
    def __contains__(self, name: object) -> bool:
        self._scan()  # rescans only when sys.path changed since the last scan
        return name in self._specs

    def __iter__(self) -> Iterator[str]:
        self._scan()
        return iter(list(self._specs))

    def __len__(self) -> int:
        self._scan()
        return len(self._specs)

    def __getitem__(self, name: str) -> T:
        return self.load(name)

    def names(self) -> list[str]:
        """Every registered name, the package's own first."""
        return list(self)

    def unknown(self, name: str) -> str:
        """The message for a name that is not registered."""
        return (
            f"{self.what} {name!r} is not registered; registered: {', '.join(self) or 'none'} "
            f"(a package adds one through the entry-point group {self.group!r}, {DOCS})"
        )

    def load(self, name: str) -> T:
        """The plug-in ``name``, imported and checked on first use; ConfigError listing the registered ones
        when there is none of that name."""
        if name not in self:
            self._scan(force=True)  # a distribution installed since the last scan
            if name not in self._specs:
                raise ConfigError(self.unknown(name))
        if name not in self._loaded:
            spec = self._specs[name]
            obj = import_spec(spec, f"{self.what} {name!r}") if isinstance(spec, str) else spec
            self._loaded[name] = self._accept(name, obj) if self._accept is not None else obj
        return self._loaded[name]


def read_options(cls: type | None, options: Mapping[str, Any], where: str, owner: str) -> Any:
    """A plug-in's ``options`` (a mapping from its config) read into its kind's settings dataclass ``cls``;
    None when the kind takes none (``cls`` None and ``options`` empty).

    The read goes through OmegaConf's structured merge, so nested settings become their dataclasses and a value
    of the wrong type is refused. An unknown key, a wrong type, or options for a kind that takes none are a
    ConfigError naming the key path under ``where`` (e.g. ``policy.options.base_url``) and what ``owner`` (e.g.
    "policy kind 'openai'") takes."""
    if cls is None:
        if options:
            raise ConfigError(f"{where}.options: {owner} takes no options")
        return None
    from omegaconf import OmegaConf
    from omegaconf.errors import OmegaConfBaseException

    try:
        return OmegaConf.to_object(OmegaConf.merge(OmegaConf.structured(cls), dict(options)))
    except OmegaConfBaseException as exc:
        key = getattr(exc, "full_key", None) or ""
        names = ", ".join(f.name for f in dataclasses.fields(cls))
        reason = str(exc).splitlines()[0]
        raise ConfigError(
            f"{where}.options{'.' + key if key else ''}: {reason} ({owner} takes: {names})"
        ) from exc
