"""Task templates: each turns a :class:`~maigym_ray.synth.world.World` into drafts of tasks.

A draft holds the instruction, the apps, the verifier (``checks``, written from the world's facts) and the plan
(written from the task's wording, in screen terms, for :mod:`maigym_ray.synth.planner`). The two never share a
value that the task asks the agent to find: an information task's answer is in the checks, and the plan reads
it off the screen; a choice ("the latest train that arrives in time") is computed from facts for the checks
and made over the screen's rows by the plan. Validation then proves they agree, on a live instance.

This module is where the single-app templates are gathered: importing it registers every one of them. They
live by kind of app, in :mod:`~maigym_ray.synth.personal_templates` (contacts, mail, calendar, notes),
:mod:`~maigym_ray.synth.service_templates` (train, bank, hotel, food, ride) and
:mod:`~maigym_ray.synth.novel_templates` (the ``ood_app`` split); cross-app ones are in
:mod:`maigym_ray.synth.cross_app`. All register with :func:`~maigym_ray.synth.drafts.template`;
``TEMPLATES`` maps name to (function, apps). The names are re-exported here, where users and tests import them.
"""

from __future__ import annotations

from maigym_ray.synth.drafts import (
    DEFAULT_TEMPLATES,
    TEMPLATES,
    Draft,
    TemplateFn,
    absent,
    answer,
    cheapest,
    exists,
    price,
    template,
    times,
)
from maigym_ray.synth.novel_templates import (
    library_borrow,
    library_renew,
    parcel_eta,
    parcel_reschedule,
    plants_schedule,
    plants_water,
)
from maigym_ray.synth.personal_templates import (
    calendar_create,
    calendar_delete,
    calendar_where,
    compose,
    contacts_add,
    contacts_favorite,
    contacts_phone,
    find_contact,
    mail_archive,
    mail_send,
    mail_time,
    new_event,
    notes_create,
    notes_lookup,
    notes_pin,
)
from maigym_ray.synth.service_templates import (
    bank_add_payee,
    bank_lookup,
    bank_transfer,
    book_hotel,
    book_train,
    food_order,
    hotel_cheapest,
    request_ride,
    ride_request,
    search_trains,
    shift_day,
    train_cheapest,
    train_first,
    transfer,
)

__all__ = [
    "DEFAULT_TEMPLATES",
    "TEMPLATES",
    "Draft",
    "TemplateFn",
    "absent",
    "answer",
    "bank_add_payee",
    "bank_lookup",
    "bank_transfer",
    "book_hotel",
    "book_train",
    "calendar_create",
    "calendar_delete",
    "calendar_where",
    "cheapest",
    "compose",
    "contacts_add",
    "contacts_favorite",
    "contacts_phone",
    "exists",
    "find_contact",
    "food_order",
    "hotel_cheapest",
    "library_borrow",
    "library_renew",
    "mail_archive",
    "mail_send",
    "mail_time",
    "new_event",
    "notes_create",
    "notes_lookup",
    "notes_pin",
    "parcel_eta",
    "parcel_reschedule",
    "plants_schedule",
    "plants_water",
    "price",
    "request_ride",
    "ride_request",
    "search_trains",
    "shift_day",
    "template",
    "times",
    "train_cheapest",
    "train_first",
    "transfer",
]
