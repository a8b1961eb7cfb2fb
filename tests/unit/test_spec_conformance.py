"""Conformance of every spec app, on the real app host over loopback HTTP.

For each app shipped as a spec: every action is reachable from the app's home screen by following links; every
action, run once through HTTP with valid input, changes the state; a reset restores the state hash; and the
element ids of every reachable screen are the same after a reset as before.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import aiohttp
import pytest

from maigym_ray.apps.host import AppHost
from maigym_ray.apps.registry import APP_CLASSES, SPEC_APPS
from maigym_ray.apps.spec import reach
from maigym_ray.apps.spec.app import holds, needs_form

pytestmark = pytest.mark.unit


@pytest.fixture
async def host() -> AsyncIterator[AppHost]:
    h = AppHost(list(SPEC_APPS))
    await h.start()
    try:
        yield h
    finally:
        await h.stop()


async def crawl(client: aiohttp.ClientSession, h: AppHost, app: str) -> dict[str, list[str]]:
    """Every screen of ``app`` reachable from its home screen by GET links, fetched over HTTP: path -> its
    element ids (the package's crawl, so the spec writer's reachability check is this one)."""

    async def fetch(path: str) -> str:
        async with client.get(h.url + path) as resp:
            assert resp.status == 200, f"{path}: {resp.status}"
            return await resp.text()

    return await reach.crawl(fetch, app)


def valid_form(
    spec: dict[str, Any], state: dict[str, Any], a: dict[str, Any], rec: dict[str, Any] | None
) -> dict:
    """Input that the action accepts (what a golden solution would type)."""
    en = a["creates"] if a["kind"] == "book" else a["entity"]
    form: dict[str, str] = {}
    for fn in a.get("fields", []):
        f = spec["entities"][en]["fields"][fn]
        now = rec.get(fn) if rec is not None and a["kind"] == "update" else None
        form[fn] = {
            "int": "3" if now != 3 else "4",
            "money": "5" if now != 5 else "6",
            "bool": "" if now else "true",
            "date": "2026-12-20",
            "enum": next((v for v in reversed(f.get("values", [])) if v != now), ""),
            "ref": (state.get(f.get("ref", ""), [{"id": "x1"}]) or [{"id": "x1"}])[0]["id"],
        }.get(f["type"], "Conformance check")
    if a["kind"] == "transfer":
        others = [r for r in state[a.get("target", a["entity"])] if r["id"] != rec["id"]]  # type: ignore[index]
        form.update(to=others[0]["id"], amount="1")
    if a["kind"] == "pay":
        tent, _, tfield = a["target"].partition(".")
        form["account"] = max(state[tent], key=lambda r: r[tfield])["id"]
    return form


@pytest.mark.parametrize("app", SPEC_APPS)
async def test_spec_app_conformance(app: str, host: AppHost) -> None:
    spec = APP_CLASSES[app].SPEC
    async with aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=30)) as client:
        before = await crawl(client, host, app)
        unreachable = reach.unreachable_actions(spec, before)
        assert not unreachable, f"{app}: actions not reachable from the home screen: {unreachable}"
        # the spec writer crawls in process (no server): it must see exactly the screens HTTP serves
        local = APP_CLASSES[app]()

        async def render(path: str) -> str:
            return reach.render_get(local, path)

        assert await reach.crawl(render, app) == before, f"{app}: the in-process crawl differs from HTTP's"
        h0 = host.apps[app].state_hash()

        for a in spec["actions"]:
            state = host.apps[app].state()
            rec = None
            if a["kind"] != "create":
                ok = [r for r in state[a["entity"]] if all(holds(c, r) for c in a.get("preconditions", []))]
                assert ok, f"{app}.{a['id']}: no seeded record meets its preconditions"
                rec = ok[0]
            path = f"/{app}/a/{a['id']}" + (f"/{rec['id']}" if rec else "")
            if needs_form(a):
                async with client.get(host.url + path + ("/new" if rec is None else "")) as resp:
                    assert resp.status == 200, f"{app}.{a['id']} form: {resp.status}"
            hash_before = host.apps[app].state_hash()
            async with client.post(host.url + path, data=valid_form(spec, state, a, rec)) as resp:
                assert resp.status == 200, f"{app}.{a['id']}: {resp.status}"
                text = await resp.text()
            assert 'role="alert"' not in text, f"{app}.{a['id']} refused valid input: {text[:400]}"
            assert host.apps[app].state_hash() != hash_before, f"{app}.{a['id']} changed nothing"
            host.restore()

        # an unknown record is a 404 screen the agent sees, never a 500, and changes nothing
        async with client.post(f"{host.url}/{app}/a/{spec['actions'][-1]['id']}/zz999") as resp:
            assert resp.status == 404
        host.restore()
        assert host.apps[app].state_hash() == h0, f"{app}: reset does not restore the state hash"
        after = await crawl(client, host, app)
        assert after == before, f"{app}: element ids differ after a reset"
