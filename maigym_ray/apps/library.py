"""Shelf: a library app (catalogue search, book details, borrow or hold, renew and return loans)."""

from __future__ import annotations

from datetime import date, timedelta
from typing import Any, ClassVar

from maigym_ray.apps.app import App, Redirect, Request, Route

DUE_NEW = "2026-12-22"  # today (2026-12-01) plus the three-week loan period
RENEW_DAYS = 14
MAX_RENEWALS = 2


def _b(bid: str, title: str, author: str, year: int, copies: int) -> dict[str, Any]:
    return {"id": bid, "title": title, "author": author, "year": year, "copies": copies}


def _loan(
    lid: str, bid: str, title: str, due: str, renewals: int = 0, status: str = "active"
) -> dict[str, Any]:
    return {"id": lid, "book": bid, "title": title, "due": due, "renewals": renewals, "status": status}


def _hold(hid: str, bid: str, title: str, status: str = "waiting") -> dict[str, Any]:
    return {"id": hid, "book": bid, "title": title, "status": status}


class LibraryApp(App):
    """A member's library account: the catalogue (``copies`` = copies on the shelf), loans and holds.

    Borrowing takes a copy off the shelf with a loan due 2026-12-22; a loan renews by 14 days at most twice;
    returning puts the copy back. A book with no copies left can be held instead; waiting holds can be cancelled.
    """

    name: ClassVar[str] = "library"
    title: ClassVar[str] = "Shelf"
    icon: ClassVar[str] = "📚"
    SCHEMA: ClassVar[dict[str, type]] = {"member": str, "books": list, "loans": list, "holds": list}

    @classmethod
    def default_seed(cls) -> dict[str, Any]:
        return {
            "member": "Alex Morgan",
            "books": [
                _b("b1", "The Left Hand of Darkness", "Ursula K. Le Guin", 1969, 2),
                _b("b2", "The Dispossessed", "Ursula K. Le Guin", 1974, 0),
                _b("b3", "Project Hail Mary", "Andy Weir", 2021, 3),
                _b("b4", "The Martian", "Andy Weir", 2011, 1),
                _b("b5", "Klara and the Sun", "Kazuo Ishiguro", 2021, 0),
                _b("b6", "The Remains of the Day", "Kazuo Ishiguro", 1989, 2),
                _b("b7", "Sapiens", "Yuval Noah Harari", 2011, 4),
                _b("b8", "The Name of the Wind", "Patrick Rothfuss", 2007, 1),
            ],
            "loans": [
                _loan("L1", "b6", "The Remains of the Day", "2026-12-08"),
                _loan("L2", "b3", "Project Hail Mary", "2026-12-09", renewals=1),
                _loan("L3", "b8", "The Name of the Wind", "2026-12-15", renewals=2),
                _loan("L4", "b7", "Sapiens", "2026-11-20", renewals=1, status="returned"),
                _loan("L5", "b4", "The Martian", "2026-11-10", status="returned"),
            ],
            "holds": [
                _hold("H1", "b5", "Klara and the Sun"),
                _hold("H2", "b2", "The Dispossessed", status="cancelled"),
                _hold("H3", "b1", "The Left Hand of Darkness", status="cancelled"),
                _hold("H4", "b4", "The Martian", status="cancelled"),
                _hold("H5", "b7", "Sapiens", status="cancelled"),
            ],
        }

    def routes(self) -> list[Route]:
        return [
            Route("GET", "/", self.catalogue),
            Route("GET", "/book/{id}", self.book),
            Route("POST", "/book/{id}/borrow", self.borrow),
            Route("POST", "/book/{id}/hold", self.hold),
            Route("GET", "/loans", self.loans),
            Route("GET", "/loan/{id}", self.loan),
            Route("POST", "/loan/{id}/renew", self.renew),
            Route("POST", "/loan/{id}/return", self.return_loan),
            Route("POST", "/hold/{id}/cancel", self.cancel_hold),
        ]

    def _get(self, collection: str, rid: str) -> dict[str, Any]:
        rec = self.find(self.data[collection], "id", rid)
        if rec is None:
            raise KeyError(f"{collection} {rid}")
        return rec

    def _active_loan(self, bid: str) -> dict[str, Any] | None:
        return next((x for x in self.data["loans"] if x["book"] == bid and x["status"] == "active"), None)

    def _waiting_hold(self, bid: str) -> dict[str, Any] | None:
        return next((h for h in self.data["holds"] if h["book"] == bid and h["status"] == "waiting"), None)

    def catalogue(self, req: Request) -> str:
        q = req.query.get("q", "")
        ql = q.strip().lower()
        books = [
            b for b in self.data["books"] if not ql or ql in b["title"].lower() or ql in b["author"].lower()
        ]
        books.sort(key=lambda b: (b["title"].lower(), b["id"]))
        return self.render("catalogue.html", books=books, q=q)

    def _book_page(self, b: dict[str, Any], error: str = "") -> str:
        return self.render(
            "book.html", b=b, loan=self._active_loan(b["id"]), hold=self._waiting_hold(b["id"]), error=error
        )

    def book(self, req: Request) -> str:
        return self._book_page(self._get("books", req.params["id"]))

    def borrow(self, req: Request) -> Redirect | str:
        b = self._get("books", req.params["id"])
        if self._active_loan(b["id"]) is not None:
            return self._book_page(b, "You already have this book on loan.")
        if b["copies"] <= 0:
            return self._book_page(b, "No copies are available; place a hold instead.")
        b["copies"] -= 1
        self.data["loans"].append(_loan(self.next_id("loans", "L"), b["id"], b["title"], DUE_NEW))
        return Redirect("/loans")

    def hold(self, req: Request) -> Redirect | str:
        b = self._get("books", req.params["id"])
        if self._waiting_hold(b["id"]) is not None:
            return self._book_page(b, "You already have a hold on this book.")
        self.data["holds"].append(_hold(self.next_id("holds", "H"), b["id"], b["title"]))
        return Redirect("/loans")

    def loans(self, req: Request) -> str:
        active = sorted(
            (x for x in self.data["loans"] if x["status"] == "active"), key=lambda x: (x["due"], x["id"])
        )
        holds = [h for h in self.data["holds"] if h["status"] == "waiting"]
        return self.render("loans.html", loans=active, holds=holds)

    def _loan_page(self, x: dict[str, Any], error: str = "", flash: str = "") -> str:
        return self.render("loan.html", x=x, max_renewals=MAX_RENEWALS, error=error, flash=flash)

    def loan(self, req: Request) -> str:
        x = self._get("loans", req.params["id"])
        flash = f"Renewed. The new due date is {x['due']}." if req.query.get("renewed") else ""
        return self._loan_page(x, flash=flash)

    def renew(self, req: Request) -> Redirect | str:
        x = self._get("loans", req.params["id"])
        if x["status"] != "active":
            return self._loan_page(x, "This book has already been returned.")
        if x["renewals"] >= MAX_RENEWALS:
            return self._loan_page(x, f"This loan has already been renewed {MAX_RENEWALS} times.")
        x["due"] = (date.fromisoformat(x["due"]) + timedelta(days=RENEW_DAYS)).isoformat()
        x["renewals"] += 1
        return Redirect(f"/loan/{x['id']}?renewed=1")

    def return_loan(self, req: Request) -> Redirect:
        x = self._get("loans", req.params["id"])
        if x["status"] == "active":
            x["status"] = "returned"
            b = self.find(self.data["books"], "id", x["book"])
            if b is not None:
                b["copies"] += 1
        return Redirect("/loans")

    def cancel_hold(self, req: Request) -> Redirect:
        h = self._get("holds", req.params["id"])
        if h["status"] == "waiting":
            h["status"] = "cancelled"
        return Redirect("/loans")
