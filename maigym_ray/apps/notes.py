"""Notes: a note-taking app (list, search, read, write, edit, pin, delete with confirmation)."""

from __future__ import annotations

from typing import Any, ClassVar

from maigym_ray.apps.app import App, Redirect, Request, Route

TODAY = "2026-12-01"


def _n(nid: str, title: str, body: str, updated: str, pinned: bool = False) -> dict[str, Any]:
    return {"id": nid, "title": title, "body": body, "pinned": pinned, "updated": updated}


class NotesApp(App):
    """Notes with a title, a body, a pinned flag and the date of the last change (today is 2026-12-01)."""

    name: ClassVar[str] = "notes"
    title: ClassVar[str] = "Notes"
    icon: ClassVar[str] = "📝"
    SCHEMA: ClassVar[dict[str, type]] = {"notes": list}

    @classmethod
    def default_seed(cls) -> dict[str, Any]:
        return {
            "notes": [
                _n(
                    "n1",
                    "Shopping list",
                    "Milk, eggs, rye bread, coffee beans, 2 lemons",
                    "2026-11-30",
                    pinned=True,
                ),
                _n(
                    "n2",
                    "Meeting notes 28 Nov",
                    "Budget review with Priya: cut travel by 10%. Next check-in on 2026-12-05.",
                    "2026-11-28",
                ),
                _n(
                    "n3",
                    "Meeting notes 29 Nov",
                    "Roadmap sync with Jonas: ship the beta on 2026-12-14, freeze features on 2026-12-10.",
                    "2026-11-29",
                ),
                _n(
                    "n4",
                    "Gift ideas",
                    "Mum: wool scarf. Ben: board game (Azul). Lena: pottery class voucher.",
                    "2026-11-21",
                ),
                _n(
                    "n5",
                    "Wi-Fi at the cabin",
                    "Network: Birchwood-Guest, password on the fridge magnet.",
                    "2026-11-12",
                    pinned=True,
                ),
                _n(
                    "n6",
                    "Shopping list (old)",
                    "Flour, butter, cinnamon, baking paper",
                    "2026-11-03",
                ),
            ]
        }

    def routes(self) -> list[Route]:
        return [
            Route("GET", "/", self.list_notes),
            Route("GET", "/note/{id}", self.note),
            Route("GET", "/note/{id}/edit", self.edit),
            Route("POST", "/note/{id}/save", self.save),
            Route("POST", "/note/{id}/pin", self.pin),
            Route("POST", "/note/{id}/delete", self.delete),
            Route("GET", "/new", self.new),
            Route("POST", "/create", self.create),
        ]

    def _note(self, nid: str) -> dict[str, Any]:
        n = self.find(self.data["notes"], "id", nid)
        if n is None:
            raise KeyError(f"note {nid}")
        return n

    def list_notes(self, req: Request) -> str:
        q = req.query.get("q", "").strip().lower()
        found = [n for n in self.data["notes"] if not q or q in n["title"].lower() or q in n["body"].lower()]
        found.sort(key=lambda n: n["updated"], reverse=True)
        found.sort(key=lambda n: not n["pinned"])  # stable: pinned first, each group newest first
        return self.render("list.html", notes=found, q=req.query.get("q", ""))

    def note(self, req: Request) -> str:
        return self.render("note.html", n=self._note(req.params["id"]))

    def edit(self, req: Request) -> str:
        return self.render("form.html", n=self._note(req.params["id"]), action="save")

    @staticmethod
    def _fields(form: dict[str, str]) -> tuple[dict[str, str], str]:
        f = {"title": form.get("title", "").strip(), "body": form.get("body", "").strip()}
        return f, "" if f["title"] else "A title is required."

    def save(self, req: Request) -> Redirect | str:
        n = self._note(req.params["id"])
        f, err = self._fields(req.form)
        if err:
            return self.render("form.html", n={**n, **f}, action="save", error=err)
        n.update(f, updated=TODAY)
        return Redirect(f"/note/{n['id']}")

    def pin(self, req: Request) -> Redirect:
        n = self._note(req.params["id"])
        n["pinned"] = not n["pinned"]
        return Redirect(f"/note/{n['id']}")

    def delete(self, req: Request) -> Redirect:
        self.data["notes"].remove(self._note(req.params["id"]))
        return Redirect("/")

    def new(self, req: Request) -> str:
        return self.render("form.html", n={"id": "", "title": "", "body": ""}, action="create")

    def create(self, req: Request) -> Redirect | str:
        f, err = self._fields(req.form)
        if err:
            return self.render("form.html", n={"id": "", **f}, action="create", error=err)
        nid = self.next_id("notes", "n")
        taken = {n["id"] for n in self.data["notes"]}
        count = len(self.data["notes"]) + 1
        while nid in taken:  # after a delete, len + 1 can name a note that still exists
            count += 1
            nid = f"n{count}"
        self.data["notes"].append({"id": nid, **f, "pinned": False, "updated": TODAY})
        return Redirect(f"/note/{nid}")
