"""Screens without a browser: the mocked apps' HTML, rendered in-process, with clicks and form posts followed.

The planner (:mod:`maigym_ray.synth.planner`) writes golden solutions by *looking at screens*: it finds the
element whose visible text names the record it wants and reads facts off the page, the way an agent would. A
real Chromium per planning step would cost a second or more per task, so :class:`Screens` does what the browser
does for these apps (they use no JavaScript): render a route, follow a link, submit the form a button belongs to
with the values typed into it, follow the redirect. What it produces is then replayed on a live Chromium by
validation (:mod:`maigym_ray.synth.validation`), which is the check that counts.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from html.parser import HTMLParser
from typing import Any
from urllib.parse import parse_qsl, urlencode, urlsplit

from maigym_ray.apps.app import App, Redirect, Request
from maigym_ray.apps.registry import make_apps
from maigym_ray.errors import TaskError

_VOID = {"input", "br", "hr", "img", "meta", "link"}


@dataclass
class Element:
    """One element with a ``data-mg-id``: what the planner can click or type into."""

    mg_id: str
    tag: str
    attrs: dict[str, str]
    text: str = ""
    form: int = -1  # index into Page.forms, -1 when outside a form
    row: str = ""  # visible text of the list item, table row or label holding it (a result's other columns)


@dataclass
class Form:
    """A form: where it posts and its fields (name -> value) as the page rendered them."""

    method: str
    action: str
    id: str = ""
    fields: list[tuple[str, str, str]] = field(default_factory=list)  # (name, value, mg_id or "")


@dataclass
class Page:
    """A parsed screen: its path, its elements by id, its forms and its visible text."""

    path: str
    elements: dict[str, Element]
    forms: list[Form]
    text: str


class _Parser(HTMLParser):
    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.elements: dict[str, Element] = {}
        self.forms: list[Form] = []
        self._form = -1
        self._open: list[Element] = []  # elements whose text is being collected
        self._stack: list[tuple[str, Element | None]] = []
        self._text: list[str] = []
        self._skip = 0  # inside <style>/<script>/<title>
        self._rows: list[tuple[str, list[str], list[Element]]] = []  # open <li>/<tr>: text, members

    def handle_starttag(self, tag: str, attrs_list: list[tuple[str, str | None]]) -> None:
        attrs = {k: v or "" for k, v in attrs_list}
        for _, text, _ in self._rows:
            text.append(" ")  # adjacent cells read as separate words
        if tag in ("style", "script", "title"):
            self._skip += 1
        if tag == "form":
            self.forms.append(
                Form(attrs.get("method", "get").lower(), attrs.get("action", ""), attrs.get("id", ""))
            )
            self._form = len(self.forms) - 1
        mg = attrs.get("data-mg-id")
        el = Element(mg, tag, attrs, form=self._form) if mg else None
        if el is not None:
            self.elements.setdefault(mg, el)  # type: ignore[arg-type]
            if self._rows:
                self._rows[-1][2].append(el)
        if tag in ("li", "tr", "label"):
            self._rows.append((tag, [], []))
        if self._form >= 0 and tag in ("input", "textarea", "select") and attrs.get("name"):
            kind = attrs.get("type", "text")
            if not (kind in ("radio", "checkbox") and "checked" not in attrs) and kind != "submit":
                self.forms[self._form].fields.append((attrs["name"], attrs.get("value", ""), mg or ""))
        if tag in _VOID:
            if el is not None:
                el.text = attrs.get("value", "") or attrs.get("placeholder", "")
            return
        if el is not None:
            self._open.append(el)
        self._stack.append((tag, el))

    def handle_endtag(self, tag: str) -> None:
        if tag in ("style", "script", "title"):
            self._skip = max(0, self._skip - 1)
        if tag == "form":
            self._form = -1
        if tag in ("li", "tr", "label") and self._rows:
            _, text, members = self._rows.pop()
            for el in members:
                el.row = " ".join("".join(text).split())
        while self._stack:
            t, el = self._stack.pop()
            if el is not None and el in self._open:
                self._open.remove(el)
                el.text = " ".join(el.text.split())
            if t == tag:
                break
        if tag in ("p", "li", "h2", "h3", "div", "tr", "label"):
            self._text.append("\n")

    def handle_data(self, data: str) -> None:
        if self._skip:
            return
        self._text.append(data)
        for _, text, _ in self._rows:
            text.append(data)
        for el in self._open:
            el.text += data


class Screens:
    """A headless, in-process browser over fresh App objects seeded with ``seeds``.

    Usage: ``s = Screens(seeds, apps); s.open_app("mail"); s.click("msg-m3"); s.page.text``. Actions that the
    page does not allow (an id not on screen) raise :class:`TaskError`: a plan that does not fit the screens.
    """

    def __init__(self, seeds: dict[str, Any], apps: list[str] | tuple[str, ...] = ()) -> None:
        self.apps: dict[str, App] = make_apps(list(apps) or ["all"])
        for name, app in self.apps.items():
            app.seed(seeds.get(name, {}))
        self.page = Page("/", {}, [], "")
        self._typed: dict[str, str] = {}
        self._ticked: dict[str, bool] = {}  # checkboxes clicked on this screen: ticked after the clicks?

    def state(self) -> dict[str, Any]:
        """Every app's state, as the verifier reads it."""
        return {name: app.state() for name, app in self.apps.items()}

    # -- navigation ---------------------------------------------------------------------------------------------
    def open_app(self, name: str) -> None:
        """What ``open_app(name=...)`` does: the app's first screen."""
        if name not in self.apps:
            raise TaskError(f"no app {name!r} on this screen set")
        self.get(f"/{name}/")

    def get(self, url: str) -> None:
        """Loads a screen (``/<app>/<path>?query``)."""
        self._request("GET", url, [])

    def _request(self, method: str, url: str, pairs: list[tuple[str, str]]) -> None:
        parts = urlsplit(url)
        segs = parts.path.split("/", 2)
        if len(segs) < 2 or segs[1] not in self.apps:
            raise TaskError(f"no app serves {url!r}")
        app = self.apps[segs[1]]
        sub = "/" + (segs[2] if len(segs) > 2 else "")
        for route in app.routes():
            params = _match(route.path, sub)
            if route.method == method and params is not None:
                lists: dict[str, list[str]] = {}
                for k, v in pairs:
                    lists.setdefault(k, []).append(v)
                form = {k: v[-1] for k, v in lists.items()}
                req = Request(params, dict(parse_qsl(parts.query)), form, lists)
                try:
                    out = route.handler(req)
                except KeyError as exc:
                    raise TaskError(f"{method} {url}: not found ({exc})") from exc
                if isinstance(out, Redirect):
                    return self._request("GET", f"/{app.name}{out.path}", [])
                self._load(parts.path + (f"?{parts.query}" if parts.query else ""), out)
                return
        raise TaskError(f"no route for {method} {url}")

    def _load(self, path: str, html: str) -> None:
        p = _Parser()
        p.feed(html)
        text = re.sub(r"[ \t]+", " ", "".join(p._text))
        self.page = Page(path, p.elements, p.forms, re.sub(r"\s*\n\s*", "\n", text).strip())
        self._typed = {}
        self._ticked = {}

    # -- actions ------------------------------------------------------------------------------------------------
    def element(self, mg_id: str) -> Element:
        """The element ``mg_id`` on the current screen."""
        el = self.page.elements.get(mg_id)
        if el is None:
            raise TaskError(f"no element {mg_id!r} on {self.page.path}")
        return el

    def type(self, mg_id: str, text: str) -> None:
        """What ``type(id=..., text=...)`` does: sets the field's value."""
        el = self.element(mg_id)
        if el.tag not in ("input", "textarea"):
            raise TaskError(f"{mg_id!r} on {self.page.path} is a <{el.tag}>, not a field")
        self._typed[mg_id] = text

    def click(self, mg_id: str) -> None:
        """What ``click(id=...)`` does: follows a link, submits a button's form, or ticks a radio button."""
        el = self.element(mg_id)
        if el.tag == "a":
            href = el.attrs.get("href", "")
            if href.startswith("#") or not href:
                return  # opens an in-page dialog (CSS :target); its buttons are already on the page
            base = self.page.path.split("?")[0]
            self.get(href if href.startswith("/") else base.rsplit("/", 1)[0] + "/" + href)
            return
        if el.tag == "input" and el.attrs.get("type") == "radio":
            self._typed[mg_id] = el.attrs.get("value", "on")
            return
        if el.tag == "input" and el.attrs.get("type") == "checkbox":
            # a click flips the box: the form then sends it when it ends up ticked
            ticked = self._ticked.get(mg_id, "checked" in el.attrs)
            self._ticked[mg_id] = not ticked
            return
        if el.tag == "button" or (el.tag == "input" and el.attrs.get("type") == "submit"):
            if el.form < 0:
                raise TaskError(f"button {mg_id!r} on {self.page.path} is not in a form")
            self._submit(self.page.forms[el.form], el)
            return
        if el.tag in ("input", "textarea", "select"):
            return  # focusing a field changes nothing
        raise TaskError(f"{mg_id!r} on {self.page.path} (<{el.tag}>) does nothing when clicked")

    def _submit(self, form: Form, button: Element) -> None:
        clicked_radio = {
            e.attrs.get("name", ""): e.attrs.get("value", "on")
            for e in self.page.elements.values()
            if e.attrs.get("type") == "radio"
            and e.mg_id in self._typed
            and (e.form == button.form or (form.id and e.attrs.get("form") == form.id))
        }
        pairs: list[tuple[str, str]] = []
        for name, value, mg in form.fields:
            if name in clicked_radio or (mg and self._ticked.get(mg) is False):
                continue  # another choice of a radio group, or a box that was ticked and a click cleared
            pairs.append((name, self._typed.get(mg, value) if mg else value))
        for mg, ticked in self._ticked.items():
            e = self.page.elements[mg]
            if ticked and "checked" not in e.attrs and e.form == button.form:
                pairs.append((e.attrs.get("name", ""), e.attrs.get("value", "on")))
        pairs += list(clicked_radio.items())
        if button.attrs.get("name"):
            pairs.append((button.attrs["name"], button.attrs.get("value", "")))
        action = form.action or self.page.path.split("?")[0]
        if form.method == "get":
            self.get(action.split("?")[0] + "?" + urlencode(pairs))
        else:
            self._request("POST", action, pairs)

    def find(self, prefix: str, text: str) -> str:
        """The id of the element whose id starts with ``prefix`` and whose visible text contains ``text``
        (case-insensitive). Several matches: the one whose text is shortest (the closest match)."""
        want = text.casefold()
        shown = {e.mg_id: e.row if e.tag == "input" else e.text for e in self.page.elements.values()}
        hits = [i for i, t in shown.items() if i.startswith(prefix) and want in t.casefold()]
        if not hits:
            raise TaskError(f"no {prefix}* element shows {text!r} on {self.page.path}")
        return min(hits, key=lambda i: len(shown[i]))

    def rows(self, prefix: str) -> list[tuple[str, str]]:
        """(id, row text) of every element whose id starts with ``prefix``, in page order: the whole list item
        (a result's other columns too), or the element's own text outside a list."""
        return [(e.mg_id, e.row or e.text) for e in self.page.elements.values() if e.mg_id.startswith(prefix)]


def _match(pattern: str, path: str) -> dict[str, str] | None:
    regex = "^" + re.sub(r"\\\{(\w+)\\\}", r"(?P<\1>[^/]+)", re.escape(pattern)) + "$"
    m = re.match(regex, path)
    return m.groupdict() if m else None
