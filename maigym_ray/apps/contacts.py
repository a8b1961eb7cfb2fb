"""People: a contacts app (list, search, details, add, edit, favourite, delete with confirmation)."""

from __future__ import annotations

from typing import Any, ClassVar

from maigym_ray.apps.app import App, Redirect, Request, Route

_FIELDS = ("name", "phone", "email", "company")


def _c(cid: str, name: str, phone: str, email: str, company: str, favorite: bool = False) -> dict[str, Any]:
    return {"id": cid, "name": name, "phone": phone, "email": email, "company": company, "favorite": favorite}


class ContactsApp(App):
    """Contacts with name, phone, email, company and a favourite flag."""

    name: ClassVar[str] = "contacts"
    title: ClassVar[str] = "People"
    icon: ClassVar[str] = "👤"
    SCHEMA: ClassVar[dict[str, type]] = {"contacts": list}

    @classmethod
    def default_seed(cls) -> dict[str, Any]:
        return {
            "contacts": [
                _c("c1", "Tom Becker", "+49 151 2223344", "tom@example.com", "Becker Bau"),
                _c("c2", "Sara Kim", "+49 160 9876543", "sara@example.com", "Kim Design"),
                _c("c3", "Omar Haddad", "+49 171 1112223", "omar@example.com", "Northwind Logistics"),
                _c("c4", "Old Plumber", "+49 30 5550000", "plumber@example.com", "Pipes & Co", False),
                _c("c5", "Carol Diaz", "+49 152 4445556", "carol@example.com", "Diaz Accounting", True),
            ]
        }

    def routes(self) -> list[Route]:
        return [
            Route("GET", "/", self.list_contacts),
            Route("GET", "/contact/{id}", self.contact),
            Route("GET", "/contact/{id}/edit", self.edit),
            Route("POST", "/contact/{id}/save", self.save),
            Route("POST", "/contact/{id}/favorite", self.favorite),
            Route("POST", "/contact/{id}/delete", self.delete),
            Route("GET", "/new", self.new),
            Route("POST", "/create", self.create),
        ]

    def _contact(self, cid: str) -> dict[str, Any]:
        c = self.find(self.data["contacts"], "id", cid)
        if c is None:
            raise KeyError(f"contact {cid}")
        return c

    def list_contacts(self, req: Request) -> str:
        q = req.query.get("q", "").strip().lower()
        cs = sorted(
            (
                c
                for c in self.data["contacts"]
                if not q or q in c["name"].lower() or q in c["company"].lower()
            ),
            key=lambda c: (not c["favorite"], c["name"]),
        )
        return self.render("list.html", contacts=cs, q=req.query.get("q", ""))

    def contact(self, req: Request) -> str:
        return self.render("contact.html", c=self._contact(req.params["id"]))

    def edit(self, req: Request) -> str:
        return self.render("form.html", c=self._contact(req.params["id"]), action="save")

    @staticmethod
    def _fields(form: dict[str, str]) -> tuple[dict[str, str], str]:
        f = {k: form.get(k, "").strip() for k in _FIELDS}
        if not f["name"]:
            return f, "A name is required."
        if f["email"] and "@" not in f["email"]:
            return f, "That email address is not valid."
        return f, ""

    def save(self, req: Request) -> Redirect | str:
        c = self._contact(req.params["id"])
        f, err = self._fields(req.form)
        if err:
            return self.render("form.html", c={**c, **f}, action="save", error=err)
        c.update(f)
        return Redirect(f"/contact/{c['id']}")

    def favorite(self, req: Request) -> Redirect:
        c = self._contact(req.params["id"])
        c["favorite"] = not c["favorite"]
        return Redirect(f"/contact/{c['id']}")

    def delete(self, req: Request) -> Redirect:
        self.data["contacts"].remove(self._contact(req.params["id"]))
        return Redirect("/")

    def new(self, req: Request) -> str:
        return self.render("form.html", c={"id": "", **dict.fromkeys(_FIELDS, "")}, action="create")

    def create(self, req: Request) -> Redirect | str:
        f, err = self._fields(req.form)
        if err:
            return self.render("form.html", c={"id": "", **f}, action="create", error=err)
        cid = f"c{max([int(c['id'][1:]) for c in self.data['contacts'] if c['id'][1:].isdigit()] + [0]) + 1}"
        self.data["contacts"].append({"id": cid, **f, "favorite": False})
        return Redirect(f"/contact/{cid}")
