"""Unit tests for the action grammar (maigym_ray/actions.py)."""

from __future__ import annotations

import ast
import builtins
import json

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from maigym_ray.actions import (
    ACTIONS,
    COORD_MAX,
    KEYS,
    MAX_ACTION_CHARS,
    PLATFORM_ACTIONS,
    check_supported,
    parse_action,
)
from maigym_ray.errors import ActionParseError, UnsupportedActionError
from maigym_ray.types import PLATFORMS, Action

pytestmark = pytest.mark.unit


# --------------------------------------------------------------------------------------------------------------
# Valid actions
# --------------------------------------------------------------------------------------------------------------

VALID = [
    # click: id as string / non-negative int, or coordinates (ints, floats, bounds)
    ('click(id="search")', Action("click", {"id": "search"})),
    ("click(id=7)", Action("click", {"id": "7"})),
    ("click(id=0)", Action("click", {"id": "0"})),
    ('click(id="train-ICE501")', Action("click", {"id": "train-ICE501"})),
    ('click(id="a_b.c:d-1")', Action("click", {"id": "a_b.c:d-1"})),
    ("click(x=0, y=1000)", Action("click", {"x": 0, "y": 1000})),
    ("click(x=500.5, y=12.25)", Action("click", {"x": 500.5, "y": 12.25})),
    ("  click ( x = 1 , y = 2 )  ", Action("click", {"x": 1, "y": 2})),
    ("click(\n\tid=3\r\n)", Action("click", {"id": "3"})),
    # long_press
    ("long_press(id=3, duration_ms=800)", Action("long_press", {"id": "3", "duration_ms": 800})),
    ("long_press(x=10, y=20)", Action("long_press", {"x": 10, "y": 20})),
    # type: required text, optional target and enter flag, JSON escapes, unicode
    ('type(text="hello")', Action("type", {"text": "hello"})),
    (
        'type(id="to", text="Munich", enter=true)',
        Action("type", {"id": "to", "text": "Munich", "enter": True}),
    ),
    ('type(text="x", enter=false)', Action("type", {"text": "x", "enter": False})),
    ('type(x=1, y=2, text="")', Action("type", {"x": 1, "y": 2, "text": ""})),
    (
        r'type(text="a \"quoted\" line\nnext\ttab \\ \/ \u00e9\u20ac")',
        Action("type", {"text": 'a "quoted" line\nnext\ttab \\ / é€'}),
    ),
    ('type(text="Max Müller 日本語 🚆")', Action("type", {"text": "Max Müller 日本語 🚆"})),
    # scroll: choices, optional target
    ('scroll(direction="down")', Action("scroll", {"direction": "down"})),
    (
        'scroll(direction="left", id="list", amount=3)',
        Action("scroll", {"direction": "left", "id": "list", "amount": 3}),
    ),
    ('scroll(direction="up", x=500, y=500)', Action("scroll", {"direction": "up", "x": 500, "y": 500})),
    # swipe / drag
    (
        "swipe(from_x=500, from_y=800, to_x=500, to_y=200)",
        Action("swipe", {"from_x": 500, "from_y": 800, "to_x": 500, "to_y": 200}),
    ),
    ('drag(from_id="a", to_id=2)', Action("drag", {"from_id": "a", "to_id": "2"})),
    (
        'drag(from_x=1, from_y=2, to_id="bin")',
        Action("drag", {"from_x": 1, "from_y": 2, "to_id": "bin"}),
    ),
    # keys
    ('key(key="Enter")', Action("key", {"key": "Enter"})),
    ('key(key="F12")', Action("key", {"key": "F12"})),
    ('hotkey(keys=["Control", "c"])', Action("hotkey", {"keys": ["Control", "c"]})),
    ('hotkey(keys=["Control","Shift","t"])', Action("hotkey", {"keys": ["Control", "Shift", "t"]})),
    # apps / navigation / wait / answer / terminate
    ('open_app(name="food")', Action("open_app", {"name": "food"})),
    ("navigate_back()", Action("navigate_back", {})),
    ("navigate_home( )", Action("navigate_home", {})),
    ("wait()", Action("wait", {})),
    ("wait(seconds=2)", Action("wait", {"seconds": 2})),
    ("wait(seconds=0.5)", Action("wait", {"seconds": 0.5})),
    ("wait(seconds=10)", Action("wait", {"seconds": 10})),
    ('answer(text="89")', Action("answer", {"text": "89"})),
    ('answer(text="€89.00")', Action("answer", {"text": "€89.00"})),
    ("terminate()", Action("terminate", {})),
    ('terminate(status="success")', Action("terminate", {"status": "success"})),
    ('terminate(status="failure")', Action("terminate", {"status": "failure"})),
]


@pytest.mark.parametrize(("text", "expected"), VALID, ids=[t for t, _ in VALID])
def test_valid_action_parses(text: str, expected: Action) -> None:
    got = parse_action(text)
    assert got == expected
    assert got.name in ACTIONS


def test_int_id_becomes_str_and_coords_keep_type() -> None:
    a = parse_action("click(id=42)")
    assert a.args["id"] == "42"
    assert isinstance(a.args["id"], str)
    b = parse_action("click(x=3, y=4.5)")
    assert type(b.args["x"]) is int
    assert type(b.args["y"]) is float


def test_every_action_has_at_least_one_valid_example() -> None:
    covered = {expected.name for _, expected in VALID}
    assert covered == set(ACTIONS)


def test_max_length_boundary() -> None:
    prefix, suffix = 'answer(text="', '")'
    body = "a" * (MAX_ACTION_CHARS - len(prefix) - len(suffix))
    ok = prefix + body + suffix
    assert len(ok) == MAX_ACTION_CHARS
    assert parse_action(ok).args["text"] == body
    with pytest.raises(ActionParseError, match="longer than"):
        parse_action(prefix + body + "a" + suffix)


# --------------------------------------------------------------------------------------------------------------
# Adversarial / invalid input
# --------------------------------------------------------------------------------------------------------------

INVALID = {
    "python_import": "__import__('os').system('x')",
    "python_import_dq": '__import__("os").system("x")',
    "one_megabyte": 'answer(text="' + "a" * 1_000_000 + '")',
    "one_megabyte_parens": "(" * 1_000_000,
    "unbalanced_open": 'click(id="a"',
    "unbalanced_close": 'click(id="a"))',
    "unbalanced_list": 'hotkey(keys=["Control", "c")',
    "unbalanced_string": 'type(text="abc)',
    "nested_call": "click(id=click(id=1))",
    "nested_call_in_list": 'hotkey(keys=[key(key="a")])',
    "nested_list": 'hotkey(keys=[["Control"]])',
    "json_object": '{"action": "click"}',
    "json_object_full": '{"action": "click", "id": "search"}',
    "json_list": '["click"]',
    "single_quoted": "type(text='hello')",
    "single_quoted_id": "click(id='search')",
    "unquoted_string": "type(text=hello)",
    "unknown_action": 'tap(id="a")',
    "unknown_action_case": 'Click(id="a")',
    "unknown_arg": 'click(id="a", force=true)',
    "positional_arg": 'click("a")',
    "duplicate_arg": 'click(id="a", id="b")',
    "missing_required_text": 'type(id="a")',
    "missing_required_swipe": "swipe(from_x=1, from_y=2, to_x=3)",
    "missing_required_hotkey": "hotkey()",
    "missing_target": "click()",
    "missing_drag_target": 'drag(from_id="a")',
    "both_id_and_xy": 'click(id="a", x=1, y=2)',
    "both_from_id_and_xy": 'drag(from_id="a", from_x=1, from_y=2, to_id="b")',
    "only_x": "click(x=10)",
    "only_y": "click(y=10)",
    "only_x_type": 'type(text="a", x=5)',
    "x_above_range": "click(x=1001, y=5)",
    "x_float_above_range": "click(x=1000.5, y=5)",
    "y_negative": "click(x=5, y=-1)",
    "swipe_out_of_range": "swipe(from_x=0, from_y=0, to_x=2000, to_y=0)",
    "bool_as_coord": "click(x=true, y=5)",
    "bool_as_int": 'long_press(id="a", duration_ms=true)',
    "bool_as_seconds": "wait(seconds=false)",
    "bool_as_id": "click(id=true)",
    "number_as_bool": 'type(text="a", enter=1)',
    "string_as_coord": 'click(x="5", y="5")',
    "negative_id": "click(id=-1)",
    "float_id": "click(id=1.5)",
    "bad_id_chars": 'click(id="a b")',
    "empty_id": 'click(id="")',
    "long_id": 'click(id="' + "a" * 65 + '")',
    "float_int_arg": 'scroll(direction="up", amount=1.5)',
    "negative_int_arg": 'scroll(direction="up", amount=-3)',
    "seconds_too_long": "wait(seconds=11)",
    "bad_choice": 'scroll(direction="sideways")',
    "bad_terminate_status": 'terminate(status="done")',
    "unknown_key": 'key(key="Hyper")',
    "unknown_hotkey_key": 'hotkey(keys=["Control", "Hyper"])',
    "empty_hotkey_list": "hotkey(keys=[])",
    "non_string_hotkey": "hotkey(keys=[1, 2])",
    "trailing_text": 'click(id="a") and then more',
    "two_actions": 'click(id="a") click(id="b")',
    "two_actions_semicolon": 'click(id="a"); click(id="b")',
    "trailing_comma_only": 'click(id="a",)',
    "empty": "",
    "whitespace_only": "   \n\t",
    "just_name": "click",
    "cyrillic_c": "\u0441lick(id=1)",
    "cyrillic_i": "cl\u0456ck(id=1)",
    "fullwidth_name": "ｃｌｉｃｋ(id=1)",
    "lookalike_arg": "click(\u0456d=1)",
    "fullwidth_paren": "click（id=1）",
    "scientific_number": "click(x=1e3, y=5)",
    "leading_zero": "click(x=007, y=5)",
    "hex_number": "click(x=0x10, y=5)",
    "nan": "click(x=NaN, y=5)",
    "none_literal": "click(id=None)",
    "python_true": 'type(text="a", enter=True)',
    "raw_newline_in_string": 'type(text="a\nb")',
    "bad_escape": r'type(text="\x41")',
    "short_unicode_escape": r'type(text="\u12")',
    "keyword_colon": 'click(id: "a")',
    "markdown_fence": '```\nclick(id="a")\n```',
    "null_byte": 'click(id="a")\x00',
}


@pytest.mark.parametrize("text", list(INVALID.values()), ids=list(INVALID))
def test_invalid_action_raises_action_parse_error(text: str) -> None:
    with pytest.raises(ActionParseError) as info:
        parse_action(text)
    # the message is for the model to read: non-empty and bounded (never echoes a megabyte back)
    assert 0 < len(str(info.value)) < 600


@pytest.mark.parametrize("value", [None, 1, b'click(id="a")', ["click(id=1)"]])
def test_non_text_input_raises_action_parse_error(value: object) -> None:
    with pytest.raises(ActionParseError, match="text"):
        parse_action(value)  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("text", "fragment"),
    [
        ('tap(id="a")', "unknown action 'tap'"),
        ('click(id="a", force=true)', "unknown argument 'force'"),
        ('click(id="a", id="b")', "given twice"),
        ('type(id="a")', "missing required argument text"),
        ('click(id="a", x=1, y=2)', "not both"),
        ("click(x=1)", "give both x and y"),
        ("click(x=1001, y=1)", "between 0 and 1000"),
        ("type(text='a')", "expected a value"),
        ("click(id=foo)", "strings must be in double quotes"),
        ('click(id="a") x', "unexpected text after the action"),
        ('swipe(from_x=1, from_y=2, to_x=3, to_y=4, id="a")', "unknown argument 'id'"),
        ("click()", "needs a target"),
        ('drag(from_id="a")', "needs to target"),
        ('scroll(direction="diagonal")', "one of up, down, left, right"),
    ],
)
def test_error_messages_explain_the_mistake(text: str, fragment: str) -> None:
    with pytest.raises(ActionParseError) as info:
        parse_action(text)
    assert fragment in str(info.value)


def test_unknown_action_message_names_it_without_repeating_the_docs() -> None:
    # The system prompt documents every action; the message names the mistake in a few tokens.
    with pytest.raises(ActionParseError) as info:
        parse_action("fly()")
    msg = str(info.value)
    assert "unknown action 'fly'" in msg and "instructions" in msg
    assert sum(name in msg for name in ACTIONS) == 0


# --------------------------------------------------------------------------------------------------------------
# Property tests: total function onto Action | ActionParseError, never eval/exec
# --------------------------------------------------------------------------------------------------------------


def _parse_or_error(text: str) -> Action | None:
    try:
        action = parse_action(text)
    except ActionParseError:
        return None
    assert isinstance(action, Action)
    assert action.name in ACTIONS
    assert set(action.args) <= set(ACTIONS[action.name])
    return action


_CALL_LIKE = (
    r"\A\s?[a-z_]{1,12}\s?\("
    r"(\s?[a-z_]{1,8}\s?=\s?"
    r"(\"[^\"\\]{0,8}\"|-?[0-9]{1,5}(\.[0-9]{1,3})?|true|false|\[(\"[a-zA-Z]{1,7}\",?){0,3}\]|[a-zA-Z(]{1,6})"
    r"\s?,?){0,4}\)\s?\Z"
)

_arg_names = sorted({k for spec in ACTIONS.values() for k in spec})
_values = st.one_of(
    st.integers(-5, 2000).map(str),
    st.floats(-5, 2000, allow_nan=False).map(lambda f: f"{f:.3f}"),
    st.sampled_from(["true", "false", "[]", '["Control", "c"]', '["a", 1]', "null", "x", '""']),
    st.sampled_from([*sorted(KEYS), "up", "down", "success", "Hyper"]).map(json.dumps),
    st.text(max_size=10).map(lambda s: json.dumps(s, ensure_ascii=False)),
)


@st.composite
def _grammar_like(draw: st.DrawFn) -> str:
    name = draw(st.sampled_from([*ACTIONS, "tap", "eval", "__import__"]))
    n = draw(st.integers(0, 5))
    args = [f"{draw(st.sampled_from(_arg_names))}={draw(_values)}" for _ in range(n)]
    sep = draw(st.sampled_from([", ", ",", " , "]))
    tail = draw(st.sampled_from(["", " ", ")", " x", ";", "\n"]))
    return f"{name}({sep.join(args)}){tail}"


_FUZZ = settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])


@_FUZZ
@given(st.text())
def test_arbitrary_text_parses_or_raises_action_parse_error(text: str) -> None:
    _parse_or_error(text)


@_FUZZ
@given(st.from_regex(_CALL_LIKE, fullmatch=True))
def test_call_like_text_parses_or_raises_action_parse_error(text: str) -> None:
    _parse_or_error(text)


@_FUZZ
@given(_grammar_like())
def test_grammar_like_text_parses_or_raises_and_round_trips(text: str) -> None:
    action = _parse_or_error(text)
    if action is not None:
        # round trip on the parsed action
        assert parse_action(action.to_text()) == action


def test_parser_never_calls_eval_exec_or_compile(monkeypatch: pytest.MonkeyPatch) -> None:
    calls: list[str] = []

    def forbidden(name: str):
        def f(*args: object, **kwargs: object) -> None:
            calls.append(name)
            raise AssertionError(f"parse_action called {name}")

        return f

    monkeypatch.setattr(builtins, "eval", forbidden("eval"))
    monkeypatch.setattr(builtins, "exec", forbidden("exec"))
    monkeypatch.setattr(builtins, "compile", forbidden("compile"))
    monkeypatch.setattr(ast, "literal_eval", forbidden("ast.literal_eval"))
    monkeypatch.setattr(ast, "parse", forbidden("ast.parse"))

    for text, expected in VALID:
        assert parse_action(text) == expected
    for text in INVALID.values():
        with pytest.raises(ActionParseError):
            parse_action(text)
    assert calls == []


# --------------------------------------------------------------------------------------------------------------
# Round trip
# --------------------------------------------------------------------------------------------------------------


@pytest.mark.parametrize(("text", "expected"), VALID, ids=[t for t, _ in VALID])
def test_round_trip_of_valid_examples(text: str, expected: Action) -> None:
    action = parse_action(text)
    rendered = action.to_text()
    assert parse_action(rendered) == action
    # to_text is canonical: rendering the re-parsed action gives the same text
    assert parse_action(rendered).to_text() == rendered


_coord = st.one_of(st.integers(0, COORD_MAX), st.integers(1, COORD_MAX * 1000).map(lambda n: n / 1000))
_id = st.one_of(st.integers(0, 10**6), st.from_regex(r"[A-Za-z0-9_.:-]{1,64}", fullmatch=True))
_target = st.one_of(
    st.fixed_dictionaries({"id": _id}),
    st.fixed_dictionaries({"x": _coord, "y": _coord}),
)


def _render(name: str, args: dict[str, object]) -> str:
    return f"{name}(" + ", ".join(f"{k}={json.dumps(v, ensure_ascii=False)}" for k, v in args.items()) + ")"


_structured = st.one_of(
    _target.map(lambda a: ("click", a)),
    st.tuples(_target, st.text(max_size=200), st.booleans()).map(
        lambda t: ("type", {**t[0], "text": t[1], "enter": t[2]})
    ),
    st.tuples(_coord, _coord, _coord, _coord).map(
        lambda c: ("swipe", {"from_x": c[0], "from_y": c[1], "to_x": c[2], "to_y": c[3]})
    ),
    st.lists(st.sampled_from(sorted(KEYS)), min_size=1, max_size=4).map(lambda k: ("hotkey", {"keys": k})),
    st.text(max_size=200).map(lambda s: ("answer", {"text": s})),
    st.integers(0, 10).map(lambda s: ("wait", {"seconds": s})),
)


@_FUZZ
@given(_structured)
def test_round_trip_of_generated_actions(case: tuple[str, dict[str, object]]) -> None:
    name, args = case
    action = parse_action(_render(name, args))
    assert action.name == name
    if "id" in args:
        assert action.args["id"] == str(args["id"])
    assert parse_action(action.to_text()) == action


@pytest.mark.parametrize("text", ["click(x=0.000001, y=5)", "wait(seconds=0.00001)"])
def test_round_trip_of_small_floats(text: str) -> None:
    action = parse_action(text)
    assert parse_action(action.to_text()) == action


def test_round_trip_of_action_near_length_limit() -> None:
    text = "hotkey(keys=[" + ",".join(['"a"'] * 500) + "])"
    assert len(text) <= MAX_ACTION_CHARS
    action = parse_action(text)
    assert parse_action(action.to_text()) == action


# --------------------------------------------------------------------------------------------------------------
# Platform support
# --------------------------------------------------------------------------------------------------------------

_SWIPE = parse_action("swipe(from_x=500, from_y=800, to_x=500, to_y=200)")
_HOTKEY = parse_action('hotkey(keys=["Control", "c"])')


def test_swipe_unsupported_on_web() -> None:
    with pytest.raises(UnsupportedActionError) as info:
        check_supported(_SWIPE, "web")
    assert "swipe" in str(info.value)
    assert "web" in str(info.value)


def test_swipe_supported_on_mobile_web() -> None:
    assert check_supported(_SWIPE, "mobile_web") is None


def test_hotkey_unsupported_on_mobile_web_but_supported_on_web() -> None:
    with pytest.raises(UnsupportedActionError, match="hotkey"):
        check_supported(_HOTKEY, "mobile_web")
    assert check_supported(_HOTKEY, "web") is None


def test_unknown_platform_supports_nothing() -> None:
    with pytest.raises(UnsupportedActionError):
        check_supported(parse_action('click(id="a")'), "playstation")


def test_platform_tables_are_consistent() -> None:
    assert set(PLATFORM_ACTIONS) == set(PLATFORMS)
    for platform, allowed in PLATFORM_ACTIONS.items():
        assert allowed <= set(ACTIONS), platform
        for name in ACTIONS:
            action = Action(name, {})
            if name in allowed:
                check_supported(action, platform)
            else:
                with pytest.raises(UnsupportedActionError):
                    check_supported(action, platform)
    # the core actions work everywhere
    for name in ("click", "type", "scroll", "key", "answer", "terminate", "wait"):
        assert all(name in allowed for allowed in PLATFORM_ACTIONS.values()), name


@pytest.mark.parametrize(
    ("text", "fragment"),
    [
        ('long_press(id="a", duration_ms=100000)', "duration_ms must be at most 5000"),
        ('long_press(id="a", duration_ms=5001)', "duration_ms must be at most 5000"),
        ('scroll(direction="down", amount=100000)', "amount must be at most 5000"),
        ("wait(seconds=30)", "between 0 and 10"),
    ],
)
def test_parameters_that_stall_a_step_are_capped(text: str, fragment: str) -> None:
    # the audit's long_press(duration_ms=100000) outlasted the step timeout and turned a bad episode into an
    # infrastructure failure; over the cap it is now a parse error the model reads, and the episode goes on
    with pytest.raises(ActionParseError, match=fragment):
        parse_action(text)
    assert parse_action('long_press(id="a", duration_ms=5000)').args["duration_ms"] == 5000


def test_the_caps_fit_inside_the_step_timeout() -> None:
    from maigym_ray.actions import LONG_PRESS_MAX_MS, WAIT_MAX_S
    from maigym_ray.config import EnvManagerConfig

    step = EnvManagerConfig().step_timeout_s
    assert LONG_PRESS_MAX_MS / 1000 <= step / 2 and WAIT_MAX_S <= step / 2
