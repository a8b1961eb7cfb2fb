"""Which mocked apps exist. An unknown name is a :class:`ConfigError` that lists the valid ones."""

from __future__ import annotations

from maigym_ray.apps.app import App
from maigym_ray.apps.bank import BankApp
from maigym_ray.apps.calendar import CalendarApp
from maigym_ray.apps.contacts import ContactsApp
from maigym_ray.apps.food import FoodApp
from maigym_ray.apps.hotel import HotelApp
from maigym_ray.apps.library import LibraryApp
from maigym_ray.apps.mail import MailApp
from maigym_ray.apps.notes import NotesApp
from maigym_ray.apps.parcel import ParcelApp
from maigym_ray.apps.plants import PlantsApp
from maigym_ray.apps.ride import RideApp
from maigym_ray.apps.train import TrainApp
from maigym_ray.errors import ConfigError

APP_CLASSES: dict[str, type[App]] = {
    cls.name: cls
    for cls in (
        TrainApp,
        RideApp,
        FoodApp,
        MailApp,
        CalendarApp,
        ContactsApp,
        NotesApp,
        BankApp,
        HotelApp,
        ParcelApp,
        LibraryApp,
        PlantsApp,
    )
}

#: Invented apps that exist only for the ``ood_app`` split: no training task ever touches them, so success on
#: them measures transfer to an unseen app, not recall.
NOVEL_APPS: tuple[str, ...] = ("parcel", "library", "plants")


def check_app_names(names: list[str] | tuple[str, ...]) -> None:
    """Raises :class:`ConfigError` naming the valid apps when any of ``names`` is unknown."""
    unknown = [n for n in names if n not in APP_CLASSES]
    if unknown:
        raise ConfigError(f"unknown app(s) {unknown}; valid apps: {', '.join(sorted(APP_CLASSES))}")


def make_apps(names: list[str] | tuple[str, ...]) -> dict[str, App]:
    """Fresh app objects (each with its own state) for ``names``; ``[]`` or ``["all"]`` means every app."""
    if not names or list(names) == ["all"]:
        names = list(APP_CLASSES)
    check_app_names(names)
    return {n: APP_CLASSES[n]() for n in names}
