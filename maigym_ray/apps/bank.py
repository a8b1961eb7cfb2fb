"""Wallet: a banking app (balance, transaction history and search, payees, transfer with review and confirm)."""

from __future__ import annotations

import re
from typing import Any, ClassVar

from maigym_ray.apps.app import App, Redirect, Request, Route

TODAY = "2026-12-01"
_AMOUNT = re.compile(r"[0-9]+(\.[0-9]{1,2})?")
_MIN_IBAN = 15


def _p(pid: str, name: str, iban: str) -> dict[str, Any]:
    return {"id": pid, "name": name, "iban": iban}


def _t(tid: str, date: str, counterparty: str, amount: float, reference: str) -> dict[str, Any]:
    return {"id": tid, "date": date, "counterparty": counterparty, "amount": amount, "reference": reference}


class BankApp(App):
    """A current account: the balance, transactions (negative amounts are money out), saved payees, transfers.

    A transfer is a form (payee, amount, reference), a review page and a confirm button; confirming appends a
    transaction dated today and lowers the balance. New payees need a name and an IBAN of 15+ characters.
    """

    name: ClassVar[str] = "bank"
    title: ClassVar[str] = "Wallet"
    icon: ClassVar[str] = "💶"
    SCHEMA: ClassVar[dict[str, type]] = {"owner": str, "balance": float, "payees": list, "transactions": list}

    @classmethod
    def default_seed(cls) -> dict[str, Any]:
        return {
            "owner": "Alex Morgan",
            "balance": 2450.75,
            "payees": [
                _p("p1", "Anna Schmidt", "DE89370400440532013000"),
                _p("p2", "Anna Schmitt", "DE12500105170648489890"),
                _p("p3", "Stadtwerke Berlin", "DE02120300000000202051"),
                _p("p4", "Hausverwaltung Krause", "DE44500105175407324931"),
                _p("p5", "Jonas Weber", "DE75512108001245126199"),
                _p("p6", "FitLife Gym", "DE91100000000123456789"),
            ],
            "transactions": [
                _t("t1", "2026-11-01", "Hausverwaltung Krause", -950.0, "Rent November"),
                _t("t2", "2026-11-03", "Northwind Logistics", 3200.0, "Salary November"),
                _t("t3", "2026-11-12", "Stadtwerke Berlin", -84.3, "Electricity 11/2026"),
                _t("t4", "2026-11-18", "Anna Schmidt", -25.5, "Concert tickets"),
                _t("t5", "2026-11-19", "Anna Schmitt", -12.0, "Lunch"),
                _t("t6", "2026-11-25", "FitLife Gym", -39.9, "Membership December"),
                _t("t7", "2026-11-28", "Jonas Weber", 60.0, "Birthday present share"),
            ],
        }

    def routes(self) -> list[Route]:
        return [
            Route("GET", "/", self.overview),
            Route("GET", "/tx/{id}", self.tx),
            Route("GET", "/transfer", self.transfer),
            Route("POST", "/transfer/review", self.review),
            Route("POST", "/transfer/confirm", self.confirm),
            Route("GET", "/payees", self.payees),
            Route("GET", "/payees/new", self.new_payee),
            Route("POST", "/payees/create", self.create_payee),
        ]

    def overview(self, req: Request) -> str:
        q = req.query.get("q", "")
        ql = q.strip().lower()
        rows = [
            (i, t)
            for i, t in enumerate(self.data["transactions"])
            if not ql or ql in t["counterparty"].lower() or ql in t["reference"].lower()
        ]
        rows.sort(key=lambda r: (r[1]["date"], r[0]), reverse=True)
        return self.render("overview.html", txs=[t for _, t in rows], q=q)

    def tx(self, req: Request) -> str:
        t = self.find(self.data["transactions"], "id", req.params["id"])
        if t is None:
            raise KeyError(f"transaction {req.params['id']}")
        payee = self.find(self.data["payees"], "name", t["counterparty"])
        return self.render("tx.html", t=t, payee=payee)

    def _form(self, payee: str = "", amount: str = "", reference: str = "", error: str = "") -> str:
        return self.render(
            "transfer.html",
            payees=self.data["payees"],
            sel=payee,
            amount=amount,
            reference=reference,
            error=error,
        )

    def transfer(self, req: Request) -> str:
        return self._form(payee=req.query.get("payee", ""))

    def _validated(self, form: dict[str, str]) -> tuple[dict[str, Any] | None, float, str]:
        """The payee and amount of a transfer form, or an error message for the first bad field."""
        payee = self.find(self.data["payees"], "id", form.get("payee", ""))
        raw = form.get("amount", "").strip()
        if payee is None:
            return None, 0.0, "Choose a payee."
        if not _AMOUNT.fullmatch(raw) or float(raw) <= 0:
            return None, 0.0, "Enter a positive amount with at most 2 decimals, e.g. 25.50."
        amount = round(float(raw), 2)
        if amount > round(float(self.data["balance"]), 2):
            return None, 0.0, f"Insufficient funds: your balance is €{self.data['balance']:.2f}."
        return payee, amount, ""

    def review(self, req: Request) -> str:
        payee, amount, err = self._validated(req.form)
        reference = req.form.get("reference", "").strip()
        if payee is None:
            return self._form(req.form.get("payee", ""), req.form.get("amount", ""), reference, err)
        return self.render("review.html", p=payee, amount=amount, reference=reference)

    def confirm(self, req: Request) -> Redirect | str:
        payee, amount, err = self._validated(req.form)
        reference = req.form.get("reference", "").strip()
        if payee is None:
            return self._form(req.form.get("payee", ""), req.form.get("amount", ""), reference, err)
        tid = self.next_id("transactions", "t")
        self.data["transactions"].append(_t(tid, TODAY, payee["name"], -amount, reference))
        self.data["balance"] = round(float(self.data["balance"]) - amount, 2)
        return Redirect(f"/tx/{tid}")

    def payees(self, req: Request) -> str:
        return self.render("payees.html", payees=self.data["payees"])

    def new_payee(self, req: Request) -> str:
        return self.render("payee_form.html", name="", iban="")

    def create_payee(self, req: Request) -> Redirect | str:
        name, iban = (req.form.get(k, "").strip() for k in ("name", "iban"))
        err = ""
        if not name:
            err = "A payee name is required."
        elif len(iban) < _MIN_IBAN:
            err = f"The IBAN must be at least {_MIN_IBAN} characters long."
        if err:
            return self.render("payee_form.html", name=name, iban=iban, error=err)
        self.data["payees"].append(_p(self.next_id("payees", "p"), name, iban))
        return Redirect("/payees")
