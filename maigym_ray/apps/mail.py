"""Post: a mail app (folders, search, read, reply, forward, archive, delete with confirmation, compose)."""

from __future__ import annotations

from typing import Any, ClassVar

from maigym_ray.apps.app import App, Redirect, Request, Route

FOLDERS = ("inbox", "sent", "archive", "trash")


def _msg(mid: str, sender: str, subject: str, body: str, date: str, folder: str = "inbox") -> dict[str, Any]:
    return {
        "id": mid,
        "folder": folder,
        "from": sender,
        "to": "alex@example.com",
        "subject": subject,
        "body": body,
        "date": date,
        "read": False,
        "starred": False,
    }


class MailApp(App):
    """Mail with folders. Sending appends to ``sent``; replies prefix ``Re: ``, forwards ``Fwd: ``."""

    name: ClassVar[str] = "mail"
    title: ClassVar[str] = "Post"
    icon: ClassVar[str] = "✉"
    SCHEMA: ClassVar[dict[str, type]] = {"me": str, "messages": list}

    @classmethod
    def default_seed(cls) -> dict[str, Any]:
        return {
            "me": "alex@example.com",
            "messages": [
                _msg(
                    "m1",
                    "carol@example.com",
                    "Invoice November",
                    "Hi Alex, the invoice is attached. Carol",
                    "2026-11-25",
                ),
                _msg(
                    "m2",
                    "dave@example.com",
                    "Project kickoff",
                    "Kickoff is on Monday at 10:00. Can you join? Dave",
                    "2026-11-26",
                ),
                _msg(
                    "m3",
                    "news@shop.example",
                    "Weekly deals newsletter",
                    "Big savings this week!",
                    "2026-11-27",
                ),
                _msg(
                    "m4",
                    "erin@example.com",
                    "Planning meeting",
                    "Let's meet in room Aurora on Thursday. Erin",
                    "2026-11-27",
                ),
                _msg(
                    "m5",
                    "carol@example.com",
                    "Invoice October (paid)",
                    "Thanks for paying. Carol",
                    "2026-10-25",
                    "archive",
                ),
            ],
        }

    def routes(self) -> list[Route]:
        return [
            Route("GET", "/", self.inbox),
            Route("GET", "/folder/{folder}", self.folder),
            Route("GET", "/message/{id}", self.message),
            Route("POST", "/message/{id}/move", self.move),
            Route("POST", "/message/{id}/star", self.star),
            Route("GET", "/compose", self.compose),
            Route("POST", "/send", self.send),
        ]

    def _message(self, mid: str) -> dict[str, Any]:
        m = self.find(self.data["messages"], "id", mid)
        if m is None:
            raise KeyError(f"message {mid}")
        return m

    def _list(self, folder: str, q: str) -> str:
        ql = q.strip().lower()
        msgs = [
            m
            for m in self.data["messages"]
            if m["folder"] == folder
            and (not ql or ql in m["subject"].lower() or ql in m["from"].lower() or ql in m["body"].lower())
        ]
        msgs.sort(key=lambda m: m["date"], reverse=True)
        return self.render("list.html", folder=folder, folders=FOLDERS, msgs=msgs, q=q)

    def inbox(self, req: Request) -> str:
        return self._list("inbox", req.query.get("q", ""))

    def folder(self, req: Request) -> str:
        f = req.params["folder"]
        if f not in FOLDERS:
            raise KeyError(f"folder {f}")
        return self._list(f, req.query.get("q", ""))

    def message(self, req: Request) -> str:
        m = self._message(req.params["id"])
        m["read"] = True
        return self.render("message.html", m=m)

    def move(self, req: Request) -> Redirect:
        m = self._message(req.params["id"])
        target = req.form.get("folder", "")
        if target not in FOLDERS:
            raise KeyError(f"folder {target}")
        back = m["folder"]
        m["folder"] = target
        return Redirect(f"/folder/{back}" if back != "inbox" else "/")

    def star(self, req: Request) -> Redirect:
        m = self._message(req.params["id"])
        m["starred"] = not m["starred"]
        return Redirect(f"/message/{m['id']}")

    def compose(self, req: Request) -> str:
        to, subject, body = "", "", ""
        if "reply" in req.query:
            m = self._message(req.query["reply"])
            to, subject = m["from"], "Re: " + m["subject"]
        elif "forward" in req.query:
            m = self._message(req.query["forward"])
            subject, body = "Fwd: " + m["subject"], f"\n\n--- Forwarded from {m['from']} ---\n{m['body']}"
        return self.render("compose.html", to=to, subject=subject, body=body)

    def send(self, req: Request) -> Redirect | str:
        to, subject, body = (req.form.get(k, "").strip() for k in ("to", "subject", "body"))
        if "@" not in to or not subject:
            return self.render(
                "compose.html",
                to=to,
                subject=subject,
                body=body,
                error="A recipient address and a subject are required.",
            )
        mid = self.next_id("messages", "m")
        self.data["messages"].append(
            {
                "id": mid,
                "folder": "sent",
                "from": self.data["me"],
                "to": to,
                "subject": subject,
                "body": body,
                "date": "2026-12-01",
                "read": True,
                "starred": False,
            }
        )
        return Redirect("/folder/sent")
