"""The metrics of OSWorld-format evaluators (the ``func`` of a task's ``evaluator``), and their verifier.

The getters (``result`` and ``expected``) read the desktop and run in its backend
(:mod:`maigym_ray.suites.osworld`); what they got comes to the verifier as state ``osworld``:
``{"result": [...], "expected": [...]}``, one entry per metric. Here the metrics only compare values, so this
module needs no device and no Ray. The subset (docs/suites/osworld.md):

=====================  ====================================  =========================================
func                   compares                              options
=====================  ====================================  =========================================
exact_match            result == rules["expected"]           (none)
fuzzy_match            similarity(result, rules["expected"]) threshold (0.9), ignore_case
check_include_exclude  every rules["include"] in result,     (none)
                       no rules["exclude"] in it
compare_text_file      two file texts, line by line          ignore_blanks, ignore_case
compare_file           two files' contents, exactly          (none)
=====================  ====================================  =========================================

A getter that found nothing (a missing file) gives None, and every metric scores None as 0, as OSWorld
does. Several metrics combine with ``conj`` "and" (all must pass; the value is the mean) or "or" (any).
"""

from __future__ import annotations

import difflib
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from maigym_ray.errors import TaskError
from maigym_ray.types import Reward


def _rule(rules: Any, key: str, func: str) -> Any:
    if not isinstance(rules, dict) or key not in rules:
        raise TaskError(f"{func}: the expected getter must give rules with {key!r}, got {rules!r}")
    return rules[key]


def exact_match(result: Any, expected: Any) -> float:
    """1 when the result equals ``rules["expected"]`` exactly."""
    if result is None:
        return 0.0
    return float(result == _rule(expected, "expected", "exact_match"))


def fuzzy_match(result: Any, expected: Any, ignore_case: bool = False) -> float:
    """The similarity ratio (0..1, difflib's) of the result's text to ``rules["expected"]``."""
    if result is None:
        return 0.0
    a, b = str(result), str(_rule(expected, "expected", "fuzzy_match"))
    if ignore_case:
        a, b = a.lower(), b.lower()
    return difflib.SequenceMatcher(None, a, b).ratio()


def check_include_exclude(result: Any, expected: Any) -> float:
    """1 when every ``rules["include"]`` string is in the result and no ``rules["exclude"]`` string is."""
    if result is None:
        return 0.0
    if not isinstance(expected, dict) or not ({"include", "exclude"} & set(expected)):
        raise TaskError("check_include_exclude: the rules need include and/or exclude lists")
    text = str(result)
    inc, exc = expected.get("include", []), expected.get("exclude", [])
    return float(all(s in text for s in inc) and not any(s in text for s in exc))


def _lines(text: str, ignore_blanks: bool, ignore_case: bool) -> list[str]:
    if ignore_case:
        text = text.lower()
    if ignore_blanks:
        return [" ".join(line.split()) for line in text.splitlines() if line.strip()]
    return text.splitlines()


def compare_text_file(
    result: Any, expected: Any, ignore_blanks: bool = False, ignore_case: bool = False
) -> float:
    """1 when two file texts have the same lines (blank lines and runs of spaces ignored with
    ``ignore_blanks``; case with ``ignore_case``)."""
    if result is None or expected is None:
        return 0.0
    return float(
        _lines(str(result), ignore_blanks, ignore_case) == _lines(str(expected), ignore_blanks, ignore_case)
    )


def compare_file(result: Any, expected: Any) -> float:
    """1 when two files' contents are identical."""
    if result is None or expected is None:
        return 0.0
    return float(result == expected)


#: func name -> (metric, the options it takes). An option outside its list is a TaskError naming it.
METRICS: dict[str, tuple[Callable[..., float], tuple[str, ...]]] = {
    "exact_match": (exact_match, ()),
    "fuzzy_match": (fuzzy_match, ("threshold", "ignore_case")),
    "check_include_exclude": (check_include_exclude, ()),
    "compare_text_file": (compare_text_file, ("ignore_blanks", "ignore_case")),
    "compare_file": (compare_file, ()),
}


def check_metric(func: Any, options: Any, where: str) -> None:
    """Raises TaskError naming the unsupported func or option (``where`` says which evaluator entry)."""
    if func not in METRICS:
        raise TaskError(f"{where}: func {func!r} is not supported; supported: {', '.join(METRICS)}")
    if not isinstance(options, dict):
        raise TaskError(f"{where}: options must be an object")
    allowed = METRICS[func][1]
    for key in options:
        if key not in allowed:
            raise TaskError(
                f"{where}: option {key!r} of {func} is not supported; supported: {', '.join(allowed) or 'none'}"
            )


def score(func: str, result: Any, expected: Any, options: dict[str, Any]) -> tuple[float, bool]:
    """One metric's value and whether it passes (fuzzy_match passes at ``threshold``, the others at 1)."""
    metric, _ = METRICS[func]
    opts = {k: v for k, v in options.items() if k != "threshold"}
    value = float(metric(result, expected, **opts))
    return value, value >= float(options.get("threshold", 0.9)) if func == "fuzzy_match" else value >= 1.0


@dataclass(frozen=True)
class OsworldVerifier:
    """Applies an OSWorld-format evaluator's metrics to what the backend's getters got (state ``osworld``)."""

    funcs: tuple[str, ...]
    options: tuple[dict[str, Any], ...]
    conj: str = "and"

    def __post_init__(self) -> None:
        if not self.funcs or len(self.funcs) != len(self.options):
            raise TaskError("an osworld verifier needs one options object per func")
        if self.conj not in ("and", "or"):
            raise TaskError(f"evaluator conj {self.conj!r} is not supported; supported: and, or")
        for i, (f, o) in enumerate(zip(self.funcs, self.options, strict=True)):
            check_metric(f, o, f"evaluator func[{i}]")

    def __call__(self, states: dict[str, Any], answer: str | None) -> Reward:
        got = states.get("osworld")
        if not isinstance(got, dict) or len(got.get("result", [])) != len(self.funcs):
            raise TaskError("the osworld verifier reads state 'osworld', which the backend did not report")
        values, passes = [], []
        for f, o, r, e in zip(self.funcs, self.options, got["result"], got["expected"], strict=True):
            v, ok = score(f, r, e, o)
            values.append(v)
            passes.append(ok)
        success = all(passes) if self.conj == "and" else any(passes)
        value = (sum(values) / len(values)) if self.conj == "and" else max(values)
        detail = ", ".join(f"{f}={v:.2f}" for f, v in zip(self.funcs, values, strict=True))
        return Reward(value, success, detail)


def build_osworld_verifier(params: dict[str, Any]) -> OsworldVerifier:
    """From verifier params ``{"func": str | [str], "options": {} | [{}], "conj": "and" | "or"}``."""
    funcs = params.get("func")
    funcs = [funcs] if isinstance(funcs, str) else funcs
    if not isinstance(funcs, list) or not all(isinstance(f, str) for f in funcs):
        raise TaskError("osworld verifier params.func must be a name or a list of names")
    options = params.get("options", {})
    options = [options] * len(funcs) if isinstance(options, dict) else options
    if not isinstance(options, list) or len(options) != len(funcs):
        raise TaskError("osworld verifier params.options must be an object or one object per func")
    return OsworldVerifier(tuple(funcs), tuple(options), str(params.get("conj", "and")))
