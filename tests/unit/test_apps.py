"""Unit tests for the mocked apps (maigym_ray/apps): seeding, reset, state copies, and the HTTP host."""

from __future__ import annotations

import copy
import json
from collections.abc import AsyncIterator
from typing import Any

import aiohttp
import pytest

from maigym_ray.apps.app import App
from maigym_ray.apps.host import SECRET_HEADER, AppHost, state_json
from maigym_ray.apps.registry import APP_CLASSES, NOVEL_APPS, SPEC_APPS, check_app_names, make_apps
from maigym_ray.errors import AppError, ConfigError

pytestmark = pytest.mark.unit

APP_NAMES = sorted(APP_CLASSES)

#: Per app: (a path that exists, with an unknown record id) for the 404 test.
UNKNOWN_RECORD = {
    "train": "/train/booking/B999",
    "ride": "/ride/ride/R999",
    "food": "/food/r/no-such-restaurant",
    "mail": "/mail/message/m999",
    "calendar": "/calendar/event/e999",
    "contacts": "/contacts/contact/c999",
    "notes": "/notes/note/n999",
    "bank": "/bank/tx/t999",
    "hotel": "/hotel/booking/S999",
    "parcel": "/parcel/parcel/P999",
    "library": "/library/loan/L999",
    "plants": "/plants/plant/pl999",
    # apps served from specs: a record screen is /<app>/e/<entity>/<id>
    **{n: f"/{n}/e/{next(iter(APP_CLASSES[n].SPEC['entities']))}/zz999" for n in SPEC_APPS},
}


def _wrong_type_value(want: type) -> Any:
    return 12345 if want not in (int, float) else "not a number"


def _mutate(data: dict[str, Any]) -> None:
    """Changes every top-level key of an app's data, nested records included."""
    for key, value in list(data.items()):
        if isinstance(value, list):
            if value and isinstance(value[0], dict):
                value[0]["__mutated__"] = True
            value.append({"junk": 1})
        elif isinstance(value, dict):
            value["__mutated__"] = {"x": [1]}
        else:
            data[key] = "mutated"
    data["__extra__"] = 1


# --------------------------------------------------------------------------------------------------------------
# App objects: seed validation, reset, state copies
# --------------------------------------------------------------------------------------------------------------


def test_registry_has_the_twelve_apps() -> None:
    assert set(APP_NAMES) - set(SPEC_APPS) == {"train", "ride", "food", "mail", "calendar", "contacts"} | {
        "notes",
        "bank",
        "hotel",
        "parcel",
        "library",
        "plants",
    }
    # the novel split: >= 10 apps, of both kinds (hand-written and spec), never all of them
    assert set(NOVEL_APPS) < set(APP_NAMES) and len(set(NOVEL_APPS)) == len(NOVEL_APPS) >= 10
    assert set(NOVEL_APPS) & set(SPEC_APPS) and set(NOVEL_APPS) - set(SPEC_APPS)
    for name, cls in APP_CLASSES.items():
        assert cls.name == name
        assert issubclass(cls, App)


@pytest.mark.parametrize("name", APP_NAMES)
def test_default_seed_matches_schema(name: str) -> None:
    cls = APP_CLASSES[name]
    seed = cls.default_seed()
    assert set(seed) == set(cls.SCHEMA)
    app = cls()
    assert app.state() == json.loads(json.dumps(seed))
    assert app.routes(), name
    assert any(r.method == "GET" and r.path == "/" for r in app.routes()), name


@pytest.mark.parametrize("name", APP_NAMES)
def test_seed_with_unknown_key_names_the_key(name: str) -> None:
    app = APP_CLASSES[name]()
    before = app.state()
    with pytest.raises(AppError) as info:
        app.seed({"definitely_not_a_key": []})
    msg = str(info.value)
    assert "'definitely_not_a_key'" in msg
    assert name in msg
    for key in APP_CLASSES[name].SCHEMA:  # lists the valid keys
        assert key in msg
    assert app.state() == before  # a rejected seed changes nothing


@pytest.mark.parametrize(
    ("name", "key"), [(n, k) for n in APP_NAMES for k in APP_CLASSES[n].SCHEMA], ids=lambda v: str(v)
)
def test_seed_with_wrong_type_names_the_key(name: str, key: str) -> None:
    app = APP_CLASSES[name]()
    before = app.state()
    want = APP_CLASSES[name].SCHEMA[key]
    with pytest.raises(AppError) as info:
        app.seed({key: _wrong_type_value(want)})
    msg = str(info.value)
    assert f"{key!r}" in msg
    assert want.__name__ in msg
    assert app.state() == before


@pytest.mark.parametrize("name", APP_NAMES)
@pytest.mark.parametrize("seed", [[], "x", None, 3])
def test_seed_must_be_an_object(name: str, seed: Any) -> None:
    with pytest.raises(AppError, match="seed must be an object"):
        APP_CLASSES[name]().seed(seed)


@pytest.mark.parametrize("name", APP_NAMES)
def test_reset_restores_default_seed_after_mutation(name: str) -> None:
    app = APP_CLASSES[name]()
    seeded = app.state()
    _mutate(app.data)
    assert app.state() != seeded
    app.reset()
    assert app.state() == seeded
    assert app.state() == json.loads(json.dumps(APP_CLASSES[name].default_seed()))
    # a second round: the snapshot itself was not aliased by the first mutation
    _mutate(app.data)
    app.reset()
    assert app.state() == seeded


@pytest.mark.parametrize("name", APP_NAMES)
def test_reset_restores_custom_seed_exactly(name: str) -> None:
    cls = APP_CLASSES[name]
    custom = cls.default_seed()
    list_key = next(k for k, t in cls.SCHEMA.items() if t is list)
    custom[list_key] = custom[list_key][:1]  # a shorter collection than the default
    app = cls()
    app.seed({list_key: custom[list_key]})
    expected = json.loads(json.dumps(custom))
    assert app.state() == expected
    _mutate(app.data)
    app.reset()
    assert app.state() == expected


@pytest.mark.parametrize("name", APP_NAMES)
def test_seed_snapshot_does_not_alias_callers_data(name: str) -> None:
    cls = APP_CLASSES[name]
    seed = cls.default_seed()
    app = cls()
    app.seed(seed)
    expected = app.state()
    _mutate(seed)
    assert app.state() == expected
    app.reset()
    assert app.state() == expected


@pytest.mark.parametrize("name", APP_NAMES)
def test_state_is_a_deep_copy(name: str) -> None:
    app = APP_CLASSES[name]()
    before = copy.deepcopy(app.data)
    st = app.state()
    assert st == before
    _mutate(st)
    assert app.data == before
    assert app.state() == before


@pytest.mark.parametrize("name", APP_NAMES)
def test_apps_do_not_share_state(name: str) -> None:
    a, b = APP_CLASSES[name](), APP_CLASSES[name]()
    _mutate(a.data)
    assert b.state() == json.loads(json.dumps(APP_CLASSES[name].default_seed()))


def test_non_json_seed_value_is_app_error() -> None:
    with pytest.raises(AppError):
        APP_CLASSES["calendar"]().seed({"events": [{1, 2}]})


def test_make_apps_unknown_name_is_config_error_listing_valid_apps() -> None:
    with pytest.raises(ConfigError) as info:
        make_apps(["nope"])
    msg = str(info.value)
    assert "'nope'" in msg
    for name in APP_NAMES:
        assert name in msg
    with pytest.raises(ConfigError, match="'nope'"):
        make_apps(["food", "nope"])
    with pytest.raises(ConfigError):
        check_app_names(("train", "Train"))


def test_make_apps_all_and_subset() -> None:
    # every registered app, the shipped ones included (other tests may register user apps before this one)
    assert set(make_apps([])) == set(APP_CLASSES) >= set(APP_NAMES)
    assert set(make_apps(["all"])) == set(APP_CLASSES)
    apps = make_apps(["mail", "food"])
    assert list(apps) == ["mail", "food"]
    assert isinstance(apps["food"], APP_CLASSES["food"])
    assert make_apps(["food"])["food"] is not make_apps(["food"])["food"]


def test_state_json_is_canonical() -> None:
    assert state_json({"b": {"y": 1, "x": [2]}, "a": 1}) == '{"a":1,"b":{"x":[2],"y":1}}'


# --------------------------------------------------------------------------------------------------------------
# AppHost in process
# --------------------------------------------------------------------------------------------------------------


def test_host_defaults_to_loopback_and_random_secret() -> None:
    a, b = AppHost(["food"]), AppHost(["food"])
    assert a.host == "127.0.0.1"
    assert a.url.startswith("http://127.0.0.1:")
    assert len(a.secret) >= 32
    assert a.secret != b.secret
    assert AppHost(["food"], secret="s3cret").secret == "s3cret"


def test_host_reset_seeds_and_rejects_unknown_apps() -> None:
    host = AppHost(["food", "mail"])
    host.reset({"food": {"address": "1 Test Street"}})
    assert host.state()["food"]["address"] == "1 Test Street"
    host.apps["food"].data["address"] = "changed"
    host.restore()
    assert host.state()["food"]["address"] == "1 Test Street"
    host.reset()  # no seeds: every app back to its default seed
    assert host.state()["food"]["address"] == APP_CLASSES["food"].default_seed()["address"]
    with pytest.raises(AppError, match="train"):
        host.reset({"train": {}})


# --------------------------------------------------------------------------------------------------------------
# AppHost over HTTP (loopback, ephemeral port)
# --------------------------------------------------------------------------------------------------------------


@pytest.fixture
async def host() -> AsyncIterator[AppHost]:
    h = AppHost(APP_NAMES)
    url = await h.start()
    assert url == h.url
    try:
        yield h
    finally:
        await h.stop()


@pytest.fixture
async def client() -> AsyncIterator[aiohttp.ClientSession]:
    async with aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=30)) as session:
        yield session


def _auth(h: AppHost) -> dict[str, str]:
    return {SECRET_HEADER: h.secret}


async def _state(h: AppHost, client: aiohttp.ClientSession) -> dict[str, Any]:
    async with client.get(f"{h.url}/_control/state", headers=_auth(h)) as resp:
        assert resp.status == 200
        return await resp.json()


async def test_host_binds_loopback_on_an_ephemeral_port(host: AppHost) -> None:
    assert host.host == "127.0.0.1"
    assert host.port > 0
    assert host.url == f"http://127.0.0.1:{host.port}"


async def test_every_app_index_page(host: AppHost, client: aiohttp.ClientSession) -> None:
    for name in APP_NAMES:
        async with client.get(f"{host.url}/{name}/") as resp:
            assert resp.status == 200, name
            assert resp.content_type == "text/html"
            text = await resp.text()
        assert "data-mg-id" in text, name
        assert APP_CLASSES[name].title in text, name
        assert host.secret not in text


async def test_launcher_lists_every_app(host: AppHost, client: aiohttp.ClientSession) -> None:
    async with client.get(f"{host.url}/") as resp:
        assert resp.status == 200
        text = await resp.text()
    assert "data-mg-id" in text
    for name in APP_NAMES:
        assert f"/{name}/" in text, name


async def test_control_state_requires_the_secret(host: AppHost, client: aiohttp.ClientSession) -> None:
    async with client.get(f"{host.url}/_control/state") as resp:
        assert resp.status == 403
        assert "bookings" not in await resp.text()
    for wrong in ("", "wrong", host.secret + "x", host.secret[:-1], host.secret.upper()):
        async with client.get(f"{host.url}/_control/state", headers={SECRET_HEADER: wrong}) as resp:
            assert resp.status == 403, wrong
    async with client.get(f"{host.url}/_control/state", headers=_auth(host)) as resp:
        assert resp.status == 200
        assert resp.content_type == "application/json"
        body = await resp.json()
    assert set(body) == set(APP_NAMES)
    assert body == host.state()


async def test_control_reset_and_seed_require_the_secret(
    host: AppHost, client: aiohttp.ClientSession
) -> None:
    for op in ("reset", "seed"):
        async with client.post(f"{host.url}/_control/{op}", json={"seeds": {}}) as resp:
            assert resp.status == 403, op
    async with client.post(
        f"{host.url}/_control/seed", json={"seeds": {"food": {"address": "9 Elm"}}}, headers=_auth(host)
    ) as resp:
        assert resp.status == 200
        assert await resp.json() == {"ok": True}
    assert host.state()["food"]["address"] == "9 Elm"
    async with client.get(f"{host.url}/_control/nope", headers=_auth(host)) as resp:
        assert resp.status == 404
    async with client.get(f"{host.url}/_control/reset", headers=_auth(host)) as resp:
        assert resp.status == 404  # reset is POST only


async def test_food_post_changes_state_and_restore_brings_back_seed(
    host: AppHost, client: aiohttp.ClientSession
) -> None:
    seeded = await _state(host, client)
    assert seeded["food"]["cart"] == {"restaurant": "", "items": {}}

    async with client.post(f"{host.url}/food/r/luigis/add/margherita", allow_redirects=False) as resp:
        assert resp.status == 303
        assert resp.headers["Location"].startswith("/food/r/luigis?added=")
    async with client.post(f"{host.url}/food/r/luigis/add/margherita") as resp:  # follows the redirect
        assert resp.status == 200
        assert "Added Margherita" in await resp.text()

    after = await _state(host, client)
    assert after["food"]["cart"] == {"restaurant": "luigis", "items": {"margherita": 2}}
    assert {k: v for k, v in after.items() if k != "food"} == {k: v for k, v in seeded.items() if k != "food"}

    host.restore()
    assert await _state(host, client) == seeded


async def test_control_reset_over_http_restores(host: AppHost, client: aiohttp.ClientSession) -> None:
    seeded = await _state(host, client)
    async with client.post(f"{host.url}/contacts/contact/c2/favorite") as resp:
        assert resp.status == 200
    assert (await _state(host, client))["contacts"] != seeded["contacts"]
    async with client.post(f"{host.url}/_control/reset", headers=_auth(host)) as resp:
        assert resp.status == 200
    assert await _state(host, client) == seeded


async def test_train_booking_with_repeated_form_fields(host: AppHost, client: aiohttp.ClientSession) -> None:
    form = aiohttp.FormData([("class", "first"), ("passenger", "Max Müller"), ("passenger", "Lea Braun")])
    async with client.post(f"{host.url}/train/train/ICE925/book", data=form, allow_redirects=False) as resp:
        assert resp.status == 303
        assert resp.headers["Location"] == "/train/booking/B2?new=1"
    train = (await _state(host, client))["train"]
    booking = train["bookings"][-1]
    assert booking == {
        "id": "B2",
        "train": "ICE925",
        "class": "first",
        "passengers": ["Max Müller", "Lea Braun"],
        "total": 184.0,
        "status": "booked",
    }
    assert next(t for t in train["trains"] if t["id"] == "ICE925")["seats"] == 38
    async with client.get(f"{host.url}/train/booking/B2?new=1") as resp:
        assert resp.status == 200
        assert "Max Müller" in await resp.text()


async def test_mail_send_appends_to_sent(host: AppHost, client: aiohttp.ClientSession) -> None:
    data = {"to": "bob@example.com", "subject": "Lunch", "body": "Friday?"}
    async with client.post(f"{host.url}/mail/send", data=data) as resp:
        assert resp.status == 200
        assert str(resp.url).endswith("/mail/folder/sent")
    sent = [m for m in (await _state(host, client))["mail"]["messages"] if m["folder"] == "sent"]
    assert [(m["to"], m["subject"], m["body"]) for m in sent] == [("bob@example.com", "Lunch", "Friday?")]


async def test_invalid_form_shows_error_and_keeps_state(host: AppHost, client: aiohttp.ClientSession) -> None:
    seeded = await _state(host, client)
    async with client.post(f"{host.url}/mail/send", data={"to": "nobody", "subject": ""}) as resp:
        assert resp.status == 200
        assert 'role="alert"' in await resp.text()
    assert await _state(host, client) == seeded


@pytest.mark.parametrize("name", APP_NAMES)
async def test_unknown_record_is_a_404_page(host: AppHost, client: aiohttp.ClientSession, name: str) -> None:
    seeded = await _state(host, client)
    async with client.get(host.url + UNKNOWN_RECORD[name]) as resp:
        assert resp.status == 404
        assert "Not found" in await resp.text()
    assert await _state(host, client) == seeded


async def test_post_to_unknown_record_is_a_404(host: AppHost, client: aiohttp.ClientSession) -> None:
    async with client.post(f"{host.url}/food/r/luigis/add/no-such-item", allow_redirects=False) as resp:
        assert resp.status == 404
    async with client.post(f"{host.url}/train/booking/B999/cancel", allow_redirects=False) as resp:
        assert resp.status == 404
    assert host.state()["food"]["cart"] == {"restaurant": "", "items": {}}


async def test_unknown_path_is_404(host: AppHost, client: aiohttp.ClientSession) -> None:
    async with client.get(f"{host.url}/nope/") as resp:
        assert resp.status == 404


async def test_404_page_escapes_the_record_id(host: AppHost, client: aiohttp.ClientSession) -> None:
    # no "/" in the id, so the request reaches the contact route and its KeyError 404 page
    async with client.get(f"{host.url}/contacts/contact/<img src=x onerror=alert(1)>") as resp:
        assert resp.status == 404
        assert resp.content_type == "text/html"
        text = await resp.text()
    assert "Not found" in text
    assert "<img" not in text


async def test_two_hosts_do_not_share_state(client: aiohttp.ClientSession) -> None:
    a, b = AppHost(["food"]), AppHost(["food"])
    await a.start()
    await b.start()
    try:
        assert a.port != b.port
        async with client.post(f"{a.url}/food/r/luigis/add/margherita") as resp:
            assert resp.status == 200
        assert a.state()["food"]["cart"]["items"] == {"margherita": 1}
        assert b.state()["food"]["cart"]["items"] == {}
        async with client.get(f"{b.url}/_control/state", headers={SECRET_HEADER: a.secret}) as resp:
            assert resp.status == 403  # one instance's secret does not open another
    finally:
        await a.stop()
        await b.stop()
