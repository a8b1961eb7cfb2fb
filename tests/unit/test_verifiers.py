"""Unit tests for the task verifiers (maigym_ray/tasks/verifiers.py)."""

from __future__ import annotations

from typing import Any

import pytest

from maigym_ray.apps.registry import make_apps
from maigym_ray.errors import TaskError
from maigym_ray.tasks.pool import TaskPool
from maigym_ray.tasks.verifiers import ChecksVerifier, build_verifier, run_verifier
from maigym_ray.types import Reward, TaskSpec

pytestmark = pytest.mark.unit


def _spec(*checks: dict[str, Any]) -> dict[str, Any]:
    return {"name": "checks", "params": {"checks": list(checks)}}


STATES: dict[str, Any] = {
    "train": {
        "bookings": [
            {
                "id": "B1",
                "train": "ICE1001",
                "class": "economy",
                "passengers": ["Alex Morgan"],
                "total": 62.0,
                "status": "booked",
            },
        ],
        "traveller": "Alex Morgan",
        "meta": {"owner": {"name": "Alex"}},
    },
    "calendar": {
        "events": [
            {"id": "e1", "title": "Team  Sync", "date": "2026-12-07", "location": "Room 2A", "attendees": []},
            {"id": "e2", "title": "Gym", "date": "2026-12-07", "location": "City Gym", "attendees": []},
        ]
    },
}


# --------------------------------------------------------------------------------------------------------------
# exists / absent
# --------------------------------------------------------------------------------------------------------------


def test_exists_passes_when_a_record_matches() -> None:
    spec = _spec(
        {
            "op": "exists",
            "app": "train",
            "path": "bookings",
            "match": {"train": "ICE1001", "status": "booked"},
        }
    )
    r = run_verifier(spec, STATES, None)
    assert r == Reward(1.0, True, "all checks passed")


def test_exists_fails_when_no_record_matches() -> None:
    spec = _spec({"op": "exists", "app": "train", "path": "bookings", "match": {"train": "ICE501"}})
    r = run_verifier(spec, STATES, None)
    assert r.value == 0.0
    assert r.success is False
    assert "check 0" in r.reason and "train.bookings" in r.reason


def test_exists_needs_every_match_key_present() -> None:
    spec = _spec(
        {"op": "exists", "app": "train", "path": "bookings", "match": {"train": "ICE1001", "seat": "12A"}}
    )
    assert run_verifier(spec, STATES, None).value == 0.0


def test_absent_passes_and_fails() -> None:
    absent_ok = _spec({"op": "absent", "app": "calendar", "path": "events", "match": {"title": "Dentist"}})
    absent_bad = _spec({"op": "absent", "app": "calendar", "path": "events", "match": {"title": "Gym"}})
    assert run_verifier(absent_ok, STATES, None).value == 1.0
    assert run_verifier(absent_bad, STATES, None).value == 0.0


def test_exists_on_a_dict_node_and_dotted_path() -> None:
    spec = _spec({"op": "exists", "app": "train", "path": "meta.owner", "match": {"name": "alex"}})
    assert run_verifier(spec, STATES, None).value == 1.0
    scalar = _spec({"op": "exists", "app": "train", "path": "traveller", "match": {"name": "Alex"}})
    assert run_verifier(scalar, STATES, None).value == 0.0  # a scalar is not a record


def test_list_values_match_exactly() -> None:
    ok = _spec(
        {"op": "exists", "app": "train", "path": "bookings", "match": {"passengers": ["alex  MORGAN "]}}
    )
    extra = _spec(
        {"op": "exists", "app": "train", "path": "bookings", "match": {"passengers": ["Alex Morgan", "Bo"]}}
    )
    assert run_verifier(ok, STATES, None).value == 1.0
    assert run_verifier(extra, STATES, None).value == 0.0


def test_all_checks_must_hold_and_reason_names_first_failure() -> None:
    spec = _spec(
        {"op": "exists", "app": "train", "path": "bookings", "match": {"id": "B1"}},
        {"op": "absent", "app": "calendar", "path": "events", "match": {"title": "Gym"}},
        {"op": "answer", "any_of": ["x"]},
    )
    r = run_verifier(spec, STATES, "x")
    assert r.value == 0.0
    assert r.reason.startswith("check 1 (absent calendar.events)")


# --------------------------------------------------------------------------------------------------------------
# normalisation and $contains
# --------------------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("title", ["team sync", "TEAM SYNC", "  Team Sync  ", "team\t\nsync", "Team   Sync"])
def test_strings_compare_case_and_whitespace_insensitively(title: str) -> None:
    spec = _spec({"op": "exists", "app": "calendar", "path": "events", "match": {"title": title}})
    assert run_verifier(spec, STATES, None).value == 1.0


def test_string_normalisation_does_not_ignore_content() -> None:
    spec = _spec({"op": "exists", "app": "calendar", "path": "events", "match": {"title": "TeamSync"}})
    assert run_verifier(spec, STATES, None).value == 0.0


@pytest.mark.parametrize(
    ("want", "ok"), [(62, True), (62.0, True), (62.00001, False), ("62", False), (61, False)]
)
def test_numbers_compare_numerically(want: Any, ok: bool) -> None:
    spec = _spec({"op": "exists", "app": "train", "path": "bookings", "match": {"total": want}})
    assert run_verifier(spec, STATES, None).value == (1.0 if ok else 0.0)


@pytest.mark.parametrize(
    ("needle", "ok"),
    [
        ("gym", True),
        ("CITY", True),
        (" city  gym ", True),
        ("room 2", True),
        ("Aurora", False),
        ("gyms", False),
    ],
)
def test_contains(needle: str, ok: bool) -> None:
    spec = _spec(
        {"op": "exists", "app": "calendar", "path": "events", "match": {"location": {"$contains": needle}}}
    )
    assert run_verifier(spec, STATES, None).value == (1.0 if ok else 0.0)


def test_contains_on_non_string_field_does_not_match() -> None:
    spec = _spec({"op": "exists", "app": "train", "path": "bookings", "match": {"total": {"$contains": "6"}}})
    assert run_verifier(spec, STATES, None).value == 0.0


def test_bool_does_not_match_number() -> None:
    states = {"contacts": {"contacts": [{"id": "c1", "favorite": True}]}}
    spec = _spec({"op": "exists", "app": "contacts", "path": "contacts", "match": {"favorite": 1}})
    assert run_verifier(spec, states, None).value == 0.0


# --------------------------------------------------------------------------------------------------------------
# answer checks
# --------------------------------------------------------------------------------------------------------------

NUMERIC_89 = _spec({"op": "answer", "any_of": ["89"], "numeric": True})


@pytest.mark.parametrize(
    "answer", ["89", "€89.00", "89.00 EUR", "It costs 89 euros.", "89,00 €", " 89 ", "89.0"]
)
def test_numeric_answer_accepts_one_matching_number(answer: str) -> None:
    assert run_verifier(NUMERIC_89, {}, answer).value == 1.0


@pytest.mark.parametrize(
    "answer",
    [None, "", "eighty-nine", "about 89 or 90", "89 or 89", "90", "8.9", "-89", "€89.01", "89 and 2 cents"],
)
def test_numeric_answer_rejects(answer: str | None) -> None:
    r = run_verifier(NUMERIC_89, {}, answer)
    assert r.value == 0.0
    assert r.success is False


def test_numeric_answer_with_several_accepted_values() -> None:
    spec = _spec({"op": "answer", "any_of": ["9.5", 10], "numeric": True})
    assert run_verifier(spec, {}, "9,50").value == 1.0
    assert run_verifier(spec, {}, "10 euros").value == 1.0
    assert run_verifier(spec, {}, "9.6").value == 0.0


@pytest.mark.parametrize(
    "answer", ["Aurora", "aurora", "  AURORA  ", "Aurora.", "'Aurora'", '"aurora"!', "Room Aurora"]
)
def test_text_answer_normalisation(answer: str) -> None:
    spec = _spec({"op": "answer", "any_of": ["Aurora", "room aurora"]})
    assert run_verifier(spec, {}, answer).value == 1.0


@pytest.mark.parametrize("answer", [None, "", "Auroras", "It is Aurora", "Boreal"])
def test_text_answer_rejects(answer: str | None) -> None:
    spec = _spec({"op": "answer", "any_of": ["Aurora"]})
    assert run_verifier(spec, {}, answer).value == 0.0


@pytest.mark.parametrize("answer", ["First edition 'Dune'", "first edition 'dune", "First edition 'Dune'."])
def test_text_answer_whose_expected_value_ends_in_a_quote(answer: str) -> None:
    spec = _spec({"op": "answer", "any_of": ["First edition 'Dune'"]})
    assert run_verifier(spec, {}, answer).value == 1.0
    assert run_verifier(spec, {}, "First edition").value == 0.0


def test_answer_check_ignores_states() -> None:
    assert run_verifier(NUMERIC_89, {"whatever": {}}, "89").value == 1.0


# --------------------------------------------------------------------------------------------------------------
# malformed specs
# --------------------------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "spec",
    [
        {"name": "nope", "params": {}},
        {"params": {"checks": []}},
        {"name": None},
        "checks",
        None,
        [],
    ],
)
def test_unknown_verifier_name_is_task_error(spec: Any) -> None:
    with pytest.raises(TaskError, match="unknown verifier"):
        build_verifier(spec)
    with pytest.raises(TaskError, match="unknown verifier"):
        run_verifier(spec, {}, None)


@pytest.mark.parametrize("params", [[], "x", 3, None])
def test_params_not_an_object_is_task_error(params: Any) -> None:
    with pytest.raises(TaskError, match="params must be an object"):
        build_verifier({"name": "checks", "params": params})


@pytest.mark.parametrize(
    ("check", "fragment"),
    [
        ({"op": "contains", "app": "a", "path": "p", "match": {}}, "unknown op 'contains'"),
        ({"app": "a", "path": "p", "match": {}}, "unknown op None"),
        ({"op": "exists", "path": "p", "match": {}}, "needs app, path and a match object"),
        ({"op": "exists", "app": "a", "match": {}}, "needs app, path and a match object"),
        ({"op": "absent", "app": "a", "path": "p"}, "needs app, path and a match object"),
        ({"op": "exists", "app": "a", "path": "p", "match": ["x"]}, "needs app, path and a match object"),
        ({"op": "answer"}, "non-empty any_of list"),
        ({"op": "answer", "any_of": []}, "non-empty any_of list"),
        ({"op": "answer", "any_of": "89"}, "non-empty any_of list"),
    ],
)
def test_malformed_check_is_task_error(check: dict[str, Any], fragment: str) -> None:
    with pytest.raises(TaskError) as info:
        build_verifier(_spec({"op": "answer", "any_of": ["ok"]}, check))
    assert fragment in str(info.value)
    assert "check 1" in str(info.value)
    with pytest.raises(TaskError):
        ChecksVerifier((check,))


@pytest.mark.parametrize("params", [{"checks": ["x"]}, {"checks": [None]}, {"checks": 5}, {"checks": "abc"}])
def test_malformed_checks_container_is_task_error(params: dict[str, Any]) -> None:
    with pytest.raises(TaskError):
        run_verifier({"name": "checks", "params": params}, {}, None)


@pytest.mark.parametrize("params", [{}, {"checks": []}])
def test_verifier_without_checks_is_rejected(params: dict[str, Any]) -> None:
    with pytest.raises(TaskError):
        run_verifier({"name": "checks", "params": params}, {}, None)


@pytest.mark.parametrize(
    ("app", "path", "fragment"),
    [
        ("train", "tickets", "train.tickets does not exist"),
        ("train", "meta.owner.age", "does not exist"),
        ("train", "bookings.0", "does not exist"),  # lists are not indexed by path parts
        ("mail", "messages", "app 'mail'"),
    ],
)
def test_missing_path_is_task_error_from_run_verifier(app: str, path: str, fragment: str) -> None:
    for op in ("exists", "absent"):
        spec = _spec({"op": op, "app": app, "path": path, "match": {"id": "x"}})
        with pytest.raises(TaskError) as info:
            run_verifier(spec, STATES, None)
        assert fragment in str(info.value)


def test_verifier_crash_becomes_task_error() -> None:
    # any_of holds a non-number for a numeric check: float() raises inside the verifier
    spec = _spec({"op": "answer", "any_of": ["eighty"], "numeric": True})
    with pytest.raises(TaskError) as info:
        run_verifier(spec, {}, "80")
    assert "ValueError" in str(info.value)
    assert "'checks'" in str(info.value)
    assert isinstance(info.value.__cause__, ValueError)


def test_verifier_does_not_mutate_states() -> None:
    import copy

    before = copy.deepcopy(STATES)
    spec = _spec(
        {"op": "exists", "app": "train", "path": "bookings", "match": {"train": "ICE1001"}},
        {"op": "absent", "app": "calendar", "path": "events", "match": {"title": {"$contains": "x"}}},
    )
    run_verifier(spec, STATES, None)
    assert before == STATES


# --------------------------------------------------------------------------------------------------------------
# builtin tasks: no task is solved by doing nothing
# --------------------------------------------------------------------------------------------------------------

BUILTIN = list(TaskPool.builtin())


def _initial_states(task: TaskSpec) -> dict[str, Any]:
    states = {}
    for name, app in make_apps(task.apps).items():
        app.seed(task.initial_state.get(name, {}))
        states[name] = app.state()
    if "desktop" in task.platforms:  # the desktop backend adds the home directory's files to the state
        states["desktop"] = {"files": list(task.initial_state.get("desktop", {}).get("files", []))}
    return states


@pytest.mark.parametrize("task", BUILTIN, ids=[t.id for t in BUILTIN])
def test_builtin_task_gives_zero_reward_on_initial_state(task: TaskSpec) -> None:
    r = run_verifier(task.verifier, _initial_states(task), None)
    assert r.value == 0.0
    assert r.success is False
    assert r.infra_failed is False


@pytest.mark.parametrize("task", BUILTIN, ids=[t.id for t in BUILTIN])
def test_builtin_task_verifier_is_well_formed(task: TaskSpec) -> None:
    verifier = build_verifier(task.verifier)
    assert isinstance(verifier, ChecksVerifier)
    assert len(verifier.checks) >= 1
    for check in verifier.checks:
        if check["op"] in ("exists", "absent"):
            assert check["app"] in task.apps or (check["app"] == "desktop" and "desktop" in task.platforms)


@pytest.mark.parametrize(
    ("answer", "ok"),
    [
        ("IC203 costs 89 euros", True),
        ("1,089.00", False),
        ("89,00 €", True),
        ("89 or 90", False),
        ("ICE501", False),
    ],
)
def test_numeric_answer_ignores_numbers_inside_words(answer: str, ok: bool) -> None:
    check = {"op": "answer", "any_of": ["89"], "numeric": True}
    assert ChecksVerifier((check,))({}, answer).success is ok
    assert ChecksVerifier(({"op": "answer", "any_of": ["1089"], "numeric": True},))({}, "1,089.00").success


@pytest.mark.parametrize(
    ("check", "fragment"),
    [
        ({"op": "exists", "app": "a", "path": "p", "match": {}, "code": "x"}, r"unknown keys \['code'\]"),
        ({"op": "answer", "any_of": ["1"], "regex": ".*"}, r"unknown keys \['regex'\]"),
        ({"op": "exists", "app": 1, "path": "p", "match": {}}, "app and path must be strings"),
        ({"op": "exists", "app": "a", "path": "p", "match": {"t": {"$regex": "."}}}, r"only operator"),
        ({"op": "exists", "app": "a", "path": "p", "match": {"t": {"$contains": 3}}}, r"only operator"),
        ({"op": "answer", "any_of": [{"x": 1}]}, "strings or numbers only"),
        ({"op": "answer", "any_of": ["1"], "numeric": "yes"}, "numeric must be true or false"),
    ],
)
def test_checks_are_strict_about_keys_and_types(check: dict[str, Any], fragment: str) -> None:
    # checks may be written by a model: anything the language does not define is refused, never ignored
    with pytest.raises(TaskError, match=fragment):
        build_verifier({"name": "checks", "params": {"checks": [check]}})
