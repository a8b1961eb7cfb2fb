"""Dishly: a food-delivery app (restaurants, menus, cart, checkout with address and tip, orders, cancel)."""

from __future__ import annotations

from typing import Any, ClassVar

from maigym_ray.apps.app import App, Redirect, Request, Route


def _menu(*items: tuple[str, str, float]) -> list[dict[str, Any]]:
    return [{"id": i, "name": n, "price": p} for i, n, p in items]


class FoodApp(App):
    """Food delivery. The cart holds items of one restaurant; adding from another restaurant starts a new cart."""

    name: ClassVar[str] = "food"
    title: ClassVar[str] = "Dishly"
    icon: ClassVar[str] = "🍜"
    SCHEMA: ClassVar[dict[str, type]] = {"restaurants": list, "cart": dict, "orders": list, "address": str}

    @classmethod
    def default_seed(cls) -> dict[str, Any]:
        return {
            "restaurants": [
                {
                    "id": "luigis",
                    "name": "Luigi's",
                    "cuisine": "Italian",
                    "menu": _menu(
                        ("margherita", "Margherita", 9.5),
                        ("diavola", "Diavola", 11.0),
                        ("tiramisu", "Tiramisu", 5.5),
                    ),
                },
                {
                    "id": "bangkok",
                    "name": "Bangkok Street",
                    "cuisine": "Thai",
                    "menu": _menu(
                        ("padthai", "Pad Thai", 12.0),
                        ("greencurry", "Green Curry", 13.5),
                        ("springrolls", "Spring Rolls", 5.0),
                    ),
                },
                {
                    "id": "burgerbarn",
                    "name": "Burger Barn",
                    "cuisine": "American",
                    "menu": _menu(
                        ("classic", "Classic Burger", 10.0),
                        ("veggie", "Veggie Burger", 9.0),
                        ("fries", "Fries", 3.5),
                    ),
                },
                {
                    "id": "sushigo",
                    "name": "Sushi Go",
                    "cuisine": "Japanese",
                    "menu": _menu(
                        ("salmonroll", "Salmon Roll", 8.0),
                        ("cucumbermaki", "Cucumber Maki", 4.5),
                        ("misosoup", "Miso Soup", 3.0),
                    ),
                },
            ],
            "cart": {"restaurant": "", "items": {}},
            "orders": [
                {
                    "id": "O1",
                    "restaurant": "burgerbarn",
                    "items": {"classic": 1, "fries": 1},
                    "tip": 0,
                    "total": 13.5,
                    "address": "12 Linden Road",
                    "status": "preparing",
                },
            ],
            "address": "12 Linden Road",
        }

    def routes(self) -> list[Route]:
        return [
            Route("GET", "/", self.home),
            Route("GET", "/r/{id}", self.restaurant),
            Route("POST", "/r/{id}/add/{item}", self.add),
            Route("GET", "/cart", self.cart),
            Route("POST", "/cart/{item}/remove", self.remove),
            Route("GET", "/checkout", self.checkout),
            Route("POST", "/order", self.order),
            Route("GET", "/orders", self.orders),
            Route("GET", "/order/{id}", self.order_page),
            Route("POST", "/order/{id}/cancel", self.cancel),
        ]

    def _restaurant(self, rid: str) -> dict[str, Any]:
        r = self.find(self.data["restaurants"], "id", rid)
        if r is None:
            raise KeyError(f"restaurant {rid}")
        return r

    def _lines(self) -> tuple[dict[str, Any] | None, list[tuple[dict[str, Any], int]], float]:
        cart = self.data["cart"]
        if not cart["restaurant"]:
            return None, [], 0.0
        r = self._restaurant(cart["restaurant"])
        lines = [(self.find(r["menu"], "id", i), q) for i, q in cart["items"].items()]
        lines = [(it, q) for it, q in lines if it is not None]
        return r, lines, round(sum(it["price"] * q for it, q in lines), 2)  # type: ignore[index]

    def home(self, req: Request) -> str:
        q = req.query.get("q", "").strip().lower()
        rs = [
            r
            for r in self.data["restaurants"]
            if not q
            or q in r["name"].lower()
            or q in r["cuisine"].lower()
            or any(q in m["name"].lower() for m in r["menu"])
        ]
        return self.render("home.html", restaurants=rs, q=req.query.get("q", ""))

    def restaurant(self, req: Request) -> str:
        r = self._restaurant(req.params["id"])
        _, lines, total = self._lines()
        count = sum(q for _, q in lines)
        added = req.query.get("added", "")
        return self.render(
            "restaurant.html",
            r=r,
            count=count,
            total=total,
            flash=f"Added {added} to your cart." if added else "",
        )

    def add(self, req: Request) -> Redirect:
        r = self._restaurant(req.params["id"])
        item = self.find(r["menu"], "id", req.params["item"])
        if item is None:
            raise KeyError(f"item {req.params['item']}")
        cart = self.data["cart"]
        if cart["restaurant"] != r["id"]:
            cart["restaurant"], cart["items"] = r["id"], {}
        cart["items"][item["id"]] = cart["items"].get(item["id"], 0) + 1
        return Redirect(f"/r/{r['id']}?added={item['name']}")

    def cart(self, req: Request) -> str:
        r, lines, total = self._lines()
        return self.render("cart.html", r=r, lines=lines, total=total)

    def remove(self, req: Request) -> Redirect:
        items = self.data["cart"]["items"]
        item = req.params["item"]
        if item in items:
            items[item] -= 1
            if items[item] <= 0:
                del items[item]
        return Redirect("/cart")

    def checkout(self, req: Request) -> str:
        r, lines, total = self._lines()
        return self.render("checkout.html", r=r, lines=lines, total=total, address=self.data["address"])

    def order(self, req: Request) -> Redirect | str:
        r, lines, total = self._lines()
        address = req.form.get("address", "").strip()
        tip = req.form.get("tip", "0")
        if r is None or not lines:
            return self.render("cart.html", r=None, lines=[], total=0.0, error="Your cart is empty.")
        if not address or tip not in ("0", "2", "5"):
            return self.render(
                "checkout.html",
                r=r,
                lines=lines,
                total=total,
                address=address,
                error="Enter an address and choose a tip.",
            )
        oid = self.next_id("orders", "O")
        self.data["orders"].append(
            {
                "id": oid,
                "restaurant": r["id"],
                "items": dict(self.data["cart"]["items"]),
                "tip": int(tip),
                "total": round(total + int(tip), 2),
                "address": address,
                "status": "preparing",
            }
        )
        self.data["cart"] = {"restaurant": "", "items": {}}
        return Redirect(f"/order/{oid}")

    def orders(self, req: Request) -> str:
        names = {r["id"]: r["name"] for r in self.data["restaurants"]}
        return self.render("orders.html", orders=list(reversed(self.data["orders"])), names=names)

    def _order(self, oid: str) -> dict[str, Any]:
        o = self.find(self.data["orders"], "id", oid)
        if o is None:
            raise KeyError(f"order {oid}")
        return o

    def order_page(self, req: Request) -> str:
        o = self._order(req.params["id"])
        r = self._restaurant(o["restaurant"])
        lines = [(self.find(r["menu"], "id", i), q) for i, q in o["items"].items()]
        return self.render("order.html", o=o, r=r, lines=lines)

    def cancel(self, req: Request) -> Redirect:
        o = self._order(req.params["id"])
        if o["status"] == "preparing":
            o["status"] = "cancelled"
        return Redirect(f"/order/{o['id']}")
