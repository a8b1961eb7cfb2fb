"""The OSWorld-format importer and metrics without a desktop: what is accepted, what is a TaskError naming the
unsupported key, and what each metric scores (the desktop run is tests/integration/test_osworld.py)."""

from __future__ import annotations

import copy
from pathlib import Path

import pytest

from maigym_ray.errors import TaskError
from maigym_ray.suites.osworld import guest_path, load_pool_spec, load_task
from maigym_ray.tasks.osworld_metrics import score
from maigym_ray.tasks.pool import TaskPool
from maigym_ray.tasks.verifiers import run_verifier

pytestmark = pytest.mark.unit

FIXTURES = Path(__file__).resolve().parents[2] / "examples" / "osworld_tasks"

BASE = {
    "id": "t1",
    "instruction": "Do it.",
    "snapshot": "editor",
    "config": [
        {"type": "execute", "parameters": {"command": ["touch", "a.txt"]}},
        {"type": "launch", "parameters": {"command": "google-chrome --remote-debugging-port=1337 http://x/"}},
        {"type": "open", "parameters": {"path": "/home/user/a.txt"}},
        {"type": "sleep", "parameters": {"seconds": 60}},
    ],
    "evaluator": {
        "func": "exact_match",
        "result": {"type": "vm_command_line", "command": "cat a.txt", "shell": True},
        "expected": {"type": "rule", "rules": {"expected": "hi\n"}},
    },
}


def _with(path: list, value) -> dict:
    raw = copy.deepcopy(BASE)
    node = raw
    for k in path[:-1]:
        node = node[k]
    node[path[-1]] = value
    return raw


def test_import_maps_steps_getters_and_verifier():
    t = load_task(BASE, golden=["click(x=1, y=1)"])
    assert t.id == "osworld.t1" and t.platforms == ("desktop",) and t.golden == ("click(x=1, y=1)",)
    steps = t.initial_state["osworld"]["config"]
    assert steps[0] == {"type": "execute", "argv": ["touch", "a.txt"], "shell": False}
    assert steps[1] == {"type": "launch", "app": "browser", "url": "http://x/", "path": ""}
    assert steps[2] == {"type": "open", "path": "~/a.txt"}
    assert steps[3] == {"type": "sleep", "seconds": 10.0}  # capped
    assert t.verifier == {
        "name": "osworld",
        "params": {"func": ["exact_match"], "options": {}, "conj": "and"},
    }
    assert guest_path("/home/user/x/y") == "~/x/y" and guest_path("rel.txt") == "rel.txt"


@pytest.mark.parametrize(
    "path,value,names",
    [
        (["config", 0], {"type": "download", "parameters": {"files": []}}, "'download' needs the network"),
        (["config", 0], {"type": "activate_window", "parameters": {}}, "step type 'activate_window'"),
        (["config", 0, "parameters", "stdout"], "out.txt", "key 'stdout'"),
        (["config", 1, "parameters", "command"], ["libreoffice", "--calc"], "launch of 'libreoffice'"),
        (["evaluator", "func"], "compare_table", "func 'compare_table'"),
        (["evaluator", "options"], {"rules": 1}, "option 'rules' of exact_match"),
        (
            ["evaluator", "result"],
            {"type": "cloud_file", "path": "http://x"},
            "'cloud_file' needs the network",
        ),
        (["evaluator", "result"], {"type": "vm_screen_size"}, "getter type 'vm_screen_size'"),
        (["evaluator", "result", "dest"], "x", "key 'dest'"),
        (["evaluator", "infeasible"], True, "key 'infeasible'"),
        (["evaluator", "conj"], "xor", "conj 'xor'"),
        (["cookies"], [], "key 'cookies'"),
        (["proxy"], True, "'proxy'"),
    ],
)
def test_unsupported_key_is_a_task_error_naming_it(path, value, names):
    with pytest.raises(TaskError, match=names):
        load_task(_with(path, value))


def test_metrics_score_what_the_getters_got():
    assert score("exact_match", "3\n", {"expected": "3\n"}, {}) == (1.0, True)
    assert score("exact_match", None, {"expected": None}, {}) == (0.0, False)  # nothing got, nothing passes
    v, ok = score(
        "fuzzy_match",
        "Dear Team, the release ships Friday",
        {"expected": "dear team, the release ships on friday."},
        {"ignore_case": True},
    )
    assert 0.9 <= v < 1.0 and ok
    assert score("fuzzy_match", "hello", {"expected": "goodbye"}, {})[1] is False
    assert score("check_include_exclude", "a DONE", {"include": ["DONE"], "exclude": ["TODO"]}, {})[1]
    assert not score("check_include_exclude", "DONE TODO", {"include": ["DONE"], "exclude": ["TODO"]}, {})[1]
    assert score("compare_text_file", "a\n\n b  c\n", "a\nb c", {"ignore_blanks": True})[1]
    assert not score("compare_text_file", "a\n\nb c\n", "a\nb c", {})[1]
    assert score("compare_file", "x", "x", {})[1] and not score("compare_file", None, "x", {})[1]


def test_verifier_combines_funcs_with_conj():
    raw = _with(
        ["evaluator"],
        {
            "func": ["exact_match", "check_include_exclude"],
            "conj": "or",
            "result": [{"type": "rule", "rules": "no"}, {"type": "rule", "rules": "has DONE"}],
            "expected": [
                {"type": "rule", "rules": {"expected": "yes"}},
                {"type": "rule", "rules": {"include": ["DONE"]}},
            ],
        },
    )
    t = load_task(raw)
    got = {
        "osworld": {"result": ["no", "has DONE"], "expected": [{"expected": "yes"}, {"include": ["DONE"]}]}
    }
    assert run_verifier(t.verifier, got, None).success
    and_spec = {**t.verifier, "params": {**t.verifier["params"], "conj": "and"}}
    r = run_verifier(and_spec, got, None)
    assert not r.success and r.value == 0.5
    with pytest.raises(TaskError, match="did not report"):
        run_verifier(t.verifier, {}, None)


def test_fixture_folder_loads_as_a_pool_with_goldens():
    pool = TaskPool.load(f"osworld:{FIXTURES}")
    ids = {t.id for t in pool}
    assert {"osworld.append-todo", "osworld.count-items", "osworld.status-done", "osworld.write-note"} <= ids
    assert all(t.golden for t in pool)
    assert [t.id for t in load_pool_spec(f"osworld:{FIXTURES / 'write-note.json'}")] == ["osworld.write-note"]
    with pytest.raises(TaskError, match="does not exist"):
        load_pool_spec("osworld:/nonexistent/tasks")
