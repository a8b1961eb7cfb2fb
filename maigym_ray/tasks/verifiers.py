"""Verifiers: pure functions of the final app states and the agent's answer.

A verifier spec is data, stored in the TaskSpec::

    {"name": "checks", "params": {"checks": [
        {"op": "exists", "app": "train", "path": "bookings", "match": {"train": "ICE501", "status": "booked"}},
        {"op": "absent", "app": "calendar", "path": "events", "match": {"title": "Gym"}},
        {"op": "answer", "any_of": ["89"], "numeric": true}]}}

``match`` values compare after normalisation (strings: trimmed, case-folded, whitespace collapsed; numbers:
numerically); ``{"$contains": s}`` tests a substring. Every check must hold for reward 1.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Protocol

from maigym_ray.errors import ConfigError, TaskError
from maigym_ray.plugins import Registry
from maigym_ray.tasks.sandbox import CodeVerifier
from maigym_ray.types import Reward


class Verifier(Protocol):
    """What the environment layer calls: final states (by app) plus the agent's answer give a Reward."""

    def __call__(self, states: dict[str, Any], answer: str | None) -> Reward: ...


def _norm(v: Any) -> Any:
    if isinstance(v, str):
        return re.sub(r"\s+", " ", v.strip()).casefold()
    if isinstance(v, bool):  # True == 1.0 in Python: keep booleans apart from numbers
        return ("bool", v)
    if isinstance(v, int | float):
        return float(v)
    if isinstance(v, list):
        return [_norm(x) for x in v]
    if isinstance(v, dict):
        return {k: _norm(x) for k, x in v.items()}
    return v


def _matches(record: Any, match: dict[str, Any]) -> bool:
    if not isinstance(record, dict):
        return False
    for key, want in match.items():
        if key not in record:
            return False
        got = record[key]
        if isinstance(want, dict) and "$contains" in want:
            if not isinstance(got, str) or _norm(want["$contains"]) not in _norm(got):
                return False
        elif _norm(got) != _norm(want):
            return False
    return True


def _resolve(states: dict[str, Any], app: str, path: str) -> Any:
    node: Any = states.get(app)
    if node is None:
        raise TaskError(f"verifier reads app {app!r}, which is not in the state (apps: {sorted(states)})")
    for part in filter(None, path.split(".")):
        if not isinstance(node, dict) or part not in node:
            raise TaskError(f"verifier path {app}.{path} does not exist in the state")
        node = node[part]
    return node


def _records(node: Any) -> list[Any]:
    return node if isinstance(node, list) else [node]


# A number standing on its own (not part of a token like "IC203"); "1,089.00" is one number.
_NUM = re.compile(r"(?<![\w.])-?(?:\d{1,3}(?:,\d{3})+(?:\.\d+)?|\d+(?:[.,]\d+)?)(?![\w])")


def _to_float(lit: str) -> float:
    if (lit.count(",") and "." in lit) or lit.count(",") > 1:  # thousands separators
        return float(lit.replace(",", ""))
    return float(lit.replace(",", "."))


def _answer_ok(answer: str | None, any_of: list[str], numeric: bool) -> bool:
    if answer is None:
        return False
    if numeric:
        found = [_to_float(m) for m in _NUM.findall(answer)]
        return len(found) == 1 and any(abs(found[0] - float(a)) < 1e-6 for a in any_of)
    # the same trim on both sides: an expected value may itself end in a quote ("First edition 'Dune'")
    norm = _norm(answer).strip(" .!\"'")
    return any(norm == _norm(a).strip(" .!\"'") for a in any_of)


#: The keys each check op takes (``numeric`` is optional); anything else is a malformed check.
CHECK_KEYS: dict[str, tuple[frozenset[str], frozenset[str]]] = {
    "exists": (frozenset({"op", "app", "path", "match"}), frozenset()),
    "absent": (frozenset({"op", "app", "path", "match"}), frozenset()),
    "answer": (frozenset({"op", "any_of"}), frozenset({"numeric"})),
}


def _check_value(v: Any, where: str) -> None:
    """A match value is JSON data; the only operator object is ``{"$contains": <string>}``."""
    if v is None or isinstance(v, str | bool | int | float):
        return
    if isinstance(v, list):
        for x in v:
            _check_value(x, where)
        return
    if isinstance(v, dict):
        if any(isinstance(k, str) and k.startswith("$") for k in v):
            if set(v) != {"$contains"} or not isinstance(v["$contains"], str):
                raise TaskError(f'{where}: the only operator is {{"$contains": <string>}}, got {sorted(v)}')
            return
        for x in v.values():
            _check_value(x, where)
        return
    raise TaskError(f"{where}: {type(v).__name__} is not JSON data")


def validate_check(i: int, c: Any) -> None:
    """Raises TaskError (saying what is wrong) unless ``c`` is a well-formed check: a known op, exactly its
    keys, each of the right type. Strict, because checks may come from a model: nothing unknown passes."""
    if not isinstance(c, dict):
        raise TaskError(f"check {i} must be an object, got {type(c).__name__}")
    op = c.get("op")
    if op not in CHECK_KEYS:
        raise TaskError(f"check {i}: unknown op {op!r}; valid: {', '.join(CHECK_KEYS)}")
    required, optional = CHECK_KEYS[op]
    if missing := required - set(c):
        need = "a non-empty any_of list" if op == "answer" else "app, path and a match object"
        raise TaskError(f"check {i} ({op}) needs {need}; lacks {sorted(missing)}")
    if unknown := set(c) - required - optional:
        raise TaskError(
            f"check {i} ({op}): unknown keys {sorted(unknown)}; valid: {sorted(required | optional)}"
        )
    if op == "answer":
        if not isinstance(c["any_of"], list) or not c["any_of"]:
            raise TaskError(f"check {i} (answer) needs a non-empty any_of list")
        if not all(isinstance(a, str | int | float) and not isinstance(a, bool) for a in c["any_of"]):
            raise TaskError(f"check {i} (answer): any_of holds strings or numbers only")
        if not isinstance(c.get("numeric", False), bool):
            raise TaskError(f"check {i} (answer): numeric must be true or false")
        return
    if not isinstance(c["app"], str) or not isinstance(c["path"], str):
        raise TaskError(f"check {i} ({op}): app and path must be strings")
    if not isinstance(c["match"], dict):
        raise TaskError(f"check {i} ({op}) needs app, path and a match object")
    for key, want in c["match"].items():
        _check_value(want, f"check {i} ({op}) match.{key}")


@dataclass(frozen=True)
class ChecksVerifier:
    """All checks must hold. Built from the ``checks`` spec above; raises TaskError on a malformed spec."""

    checks: tuple[dict[str, Any], ...]

    def __post_init__(self) -> None:
        if not self.checks:
            raise TaskError("a checks verifier needs at least one check (an empty one would pass everything)")
        for i, c in enumerate(self.checks):
            validate_check(i, c)

    def __call__(self, states: dict[str, Any], answer: str | None) -> Reward:
        for i, c in enumerate(self.checks):
            if c["op"] == "answer":
                ok = _answer_ok(answer, [str(a) for a in c["any_of"]], bool(c.get("numeric")))
            else:
                found = any(_matches(r, c["match"]) for r in _records(_resolve(states, c["app"], c["path"])))
                ok = found if c["op"] == "exists" else not found
            if not ok:
                return Reward(
                    0.0, False, f"check {i} ({c['op']} {c.get('app', '')}.{c.get('path', '')}) failed"
                )
        return Reward(1.0, True, "all checks passed")


@dataclass(frozen=True)
class PageRewardVerifier:
    """The reward a suite's own page reported (MiniWoB++), read from the state its backend returns under
    ``suite``: ``{"done", "reward", "raw_reward", "reason"}``. Nothing is recomputed here: the value is the
    page's raw reward clipped to [0, 1] (the page gives -1 for a failure); success means the page ended the
    episode with a positive raw reward. The page's time-discounted reward is kept in the reason."""

    suite: str

    def __call__(self, states: dict[str, Any], answer: str | None) -> Reward:
        page = states.get(self.suite)
        if not isinstance(page, dict) or "raw_reward" not in page:
            raise TaskError(f"page_reward reads state {self.suite!r}, which the backend did not report")
        raw, done = float(page["raw_reward"]), bool(page["done"])
        reason = f"page: done={done} reward={page.get('reward')} raw={raw} ({page.get('reason')})"
        if not done:
            return Reward(0.0, False, reason)
        return Reward(min(1.0, max(0.0, raw)), raw > 0, reason)


def _check_list(checks: Any) -> tuple[dict[str, Any], ...]:
    if not isinstance(checks, list):
        raise TaskError(f"verifier params.checks must be a list, got {type(checks).__name__}")
    return tuple(checks)


def build_checks(params: dict[str, Any]) -> Verifier:
    """``checks``: every check of ``params.checks`` must hold."""
    return ChecksVerifier(_check_list(params.get("checks")))


def build_page_reward(params: dict[str, Any]) -> Verifier:
    """``page_reward``: the reward an outside suite's page reports (``params.suite``, default miniwob)."""
    return PageRewardVerifier(str(params.get("suite", "miniwob")))


def build_code(params: dict[str, Any]) -> Verifier:
    """``code``: hand-written (trusted) code only; still only ever run inside the bubblewrap jail (tasks/jail.py)."""
    return CodeVerifier(
        params.get("code"), float(params.get("timeout_s", 2.0)), int(params.get("memory_mb", 256))
    )


def _accept(name: str, obj: Any) -> Callable[[dict[str, Any]], Verifier]:
    if not callable(obj):
        raise ConfigError(f"verifier {name!r} is a {type(obj).__name__}, not a builder (params -> Verifier)")
    return obj  # type: ignore[no-any-return]


#: Verifier builders by name, ``build(params) -> Verifier`` (entry-point group ``maigym_ray.verifiers``):
#: checks, page_reward, osworld (OSWorld-format evaluators over what the osworld backend's getters read,
#: tasks/osworld_metrics.py), code, and any a package adds.
VERIFIERS: Registry[Callable[[dict[str, Any]], Verifier]] = Registry("verifiers", "verifier", _accept)


def build_verifier(spec: dict[str, Any]) -> Verifier:
    """Builds the verifier a TaskSpec names. Unknown names and malformed params are TaskErrors."""
    name = spec.get("name") if isinstance(spec, dict) else None
    if not isinstance(name, str) or name not in VERIFIERS:
        raise TaskError(f"unknown verifier {name!r}; registered: {', '.join(VERIFIERS)}")
    params = spec.get("params", {})
    if not isinstance(params, dict):
        raise TaskError("verifier params must be an object")
    try:
        build = VERIFIERS.load(name)
    except ConfigError as exc:  # a registered verifier whose module does not import: the task cannot run
        raise TaskError(str(exc)) from exc
    return build(params)


def run_verifier(spec: dict[str, Any], states: dict[str, Any], answer: str | None) -> Reward:
    """Builds and runs a verifier. A verifier that raises is a TaskError naming the task's verifier, not a 0."""
    verifier = build_verifier(spec)
    try:
        return verifier(states, answer)
    except TaskError:
        raise
    except Exception as exc:
        raise TaskError(f"verifier {spec.get('name')!r} raised {type(exc).__name__}: {exc}") from exc
