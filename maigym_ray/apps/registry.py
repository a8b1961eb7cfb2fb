"""Which mocked apps exist. An unknown name is a :class:`ConfigError` that lists the valid ones."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from maigym_ray.apps.app import App
from maigym_ray.apps.spec.app import load_spec_app
from maigym_ray.apps.spec.loader import BUILTIN_DIR
from maigym_ray.errors import ConfigError
from maigym_ray.plugins import Registry, import_spec


def _accept(name: str, cls: Any) -> type[App]:
    if not (isinstance(cls, type) and issubclass(cls, App)) or not isinstance(
        getattr(cls, "name", None), str
    ):
        raise ConfigError(f"app {name!r}: {cls!r} is not a subclass of maigym_ray.apps.app.App with a name")
    if cls.name != name:
        raise ConfigError(f"app {name!r}: the class {cls.__module__}.{cls.__name__} is named {cls.name!r}")
    return cls


#: App classes by name (entry-point group ``maigym_ray.apps``): the package's own mocked apps, declared in its
#: pyproject.toml, and any a package adds. Each app's module is imported when the app is first used.
APP_CLASSES: Registry[type[App]] = Registry("apps", "app", _accept)

#: The ``novel`` split: apps that exist only for the ``ood_app`` split. No SFT or RL training task ever touches
#: them (synthesised and spec-derived tasks on them are split ``ood_app``; experiment=novel_apps refuses a
#: training family on them), so success on them measures transfer to an unseen app, not recall. Three
#: hand-written apps and seven spec apps of domains no training app covers.
NOVEL_APPS: tuple[str, ...] = (
    "parcel",
    "library",
    "plants",
    "coworking",
    "donate",
    "podcasts",
    "salon",
    "smarthome",
    "tutors",
    "vet",
)


def register_app(spec: str | type[App]) -> str:
    """Adds a user's App subclass, given as ``"module:Class"`` or the class, to APP_CLASSES; returns its name.

    This is how ``env.apps=[my_pkg.apps:MyApp]`` works without editing this module: every process that reads
    the config (driver, manager, the node's app server) imports the class the same way."""
    cls = import_spec(spec, "app") if isinstance(spec, str) else spec
    name = getattr(cls, "name", None)
    _accept(name if isinstance(name, str) else repr(spec), cls)
    APP_CLASSES.register(cls.name, cls)
    return cls.name


def register_spec(path: str | Path) -> str:
    """Loads the app spec at ``path`` (a SpecError if it is bad), registers its SpecApp; returns the app name.
    The same file twice is one app (every process that reads the config registers it again)."""
    key = str(Path(path).resolve())
    if key not in _SPEC_FILES:
        _SPEC_FILES[key] = register_app(load_spec_app(path))
    return _SPEC_FILES[key]


_SPEC_FILES: dict[str, str] = {}


#: The apps served from the spec files shipped in ``maigym_ray/apps/specs/`` (in file-name order).
SPEC_APPS: tuple[str, ...] = tuple(register_spec(p) for p in sorted(BUILTIN_DIR.glob("*.json")))


def resolve_app_names(names: list[str] | tuple[str, ...]) -> list[str]:
    """``names`` with every ``"module:Class"`` entry and every spec file (``*.json``) registered and replaced by
    its app name."""
    return [register_spec(n) if n.endswith(".json") else register_app(n) if ":" in n else n for n in names]


def check_app_names(names: list[str] | tuple[str, ...]) -> None:
    """Raises :class:`ConfigError` naming the valid apps when any of ``names`` is unknown (class paths
    ``"module:Class"`` are registered first)."""
    unknown = [n for n in resolve_app_names(names) if n not in APP_CLASSES and n != "all"]
    if unknown:
        raise ConfigError(f"unknown app(s) {unknown}; valid apps: {', '.join(sorted(APP_CLASSES))}")


def make_apps(names: list[str] | tuple[str, ...]) -> dict[str, App]:
    """Fresh app objects (each with its own state) for ``names``; ``[]`` or ``["all"]`` means every app, and a
    ``"module:Class"`` entry registers a user's app first."""
    names = resolve_app_names(names)
    if not names or "all" in names:  # "all" is every registered app, plus any user app listed beside it
        names = list(dict.fromkeys([*APP_CLASSES, *(n for n in names if n != "all")]))
    check_app_names(names)
    return {n: APP_CLASSES[n]() for n in names}
