"""A model's own chat format, read off its Jinja chat template.

The harness renders the system turn, each user turn and the assistant opener as separate text segments, each
tokenised once (prompt.py), so it needs the template's markup piece by piece, not a whole rendered
conversation. ``from_template`` renders a few probe conversations with sentinel texts and cuts the markup out
between them, then checks that the pieces, put back together, give exactly what the template renders for a
longer conversation. A template that does not decompose so (one that merges the system text into the first
user turn, say) is a ConfigError that asks for a named ``policy.chat.format`` instead.

The template is rendered in Jinja's immutable sandbox, as transformers does: it comes with model files.
"""

from __future__ import annotations

import functools
import json
from pathlib import Path

from maigym_ray.errors import ConfigError

_SYS, _USER, _USER2, _REPLY = "\x01S\x01", "\x01U\x01", "\x01V\x01", "\x01R\x01"


# Cached: every episode builds its policy (rollout.make_policy), and a model's template does not change.
@functools.lru_cache(maxsize=8)
def model_template(model_dir: str | Path) -> str:
    """The chat template of a model directory (``chat_template.jinja``, else ``tokenizer_config.json``'s)."""
    d = Path(model_dir)
    if (d / "chat_template.jinja").is_file():
        return (d / "chat_template.jinja").read_text()
    try:
        template = json.loads((d / "tokenizer_config.json").read_text()).get("chat_template")
    except (OSError, ValueError):
        template = None
    if isinstance(template, list):  # named templates: the default one
        template = next((t["template"] for t in template if t.get("name") == "default"), None)
    if not isinstance(template, str) or not template:
        raise ConfigError(f"{model_dir} has no chat template: set policy.chat.format (chatml, llama3, ...)")
    return template


def _escape(text: str) -> str:
    return text.replace("{", "{{").replace("}", "}}")


@functools.lru_cache(maxsize=8)
def from_template(template: str) -> tuple[str, str, str]:
    """(system turn, user turn, assistant opener) of ``template``; each turn holds ``{text}``."""
    from jinja2.exceptions import TemplateError
    from jinja2.sandbox import ImmutableSandboxedEnvironment

    env = ImmutableSandboxedEnvironment(
        trim_blocks=True, lstrip_blocks=True, extensions=["jinja2.ext.loopcontrols"]
    )

    def raise_exception(msg: str) -> None:
        raise TemplateError(msg)

    env.globals["raise_exception"] = raise_exception
    try:
        compiled = env.from_string(template)

        def render(msgs: list[tuple[str, str]], gen: bool) -> str:
            return compiled.render(
                messages=[{"role": r, "content": c} for r, c in msgs],
                add_generation_prompt=gen,
                bos_token="",
                eos_token="",
            )

        sys_only = render([("system", _SYS)], False)
        with_user = render([("system", _SYS), ("user", _USER)], False)
        opened = render([("system", _SYS), ("user", _USER)], True)
        longer = render([("system", _SYS), ("user", _USER), ("assistant", _REPLY), ("user", _USER2)], True)
    except TemplateError as exc:
        raise ConfigError(
            f"the model's chat template does not render: {exc}; set policy.chat.format"
        ) from exc
    fail = ConfigError(
        "the model's chat template does not split into system, user and assistant turns: set "
        "policy.chat.format (chatml, llama3, gemma, mistral) or its parts"
    )
    if not (with_user.startswith(sys_only) and opened.startswith(with_user)) or sys_only.count(_SYS) != 1:
        raise fail
    user = with_user[len(sys_only) :]
    opener = opened[len(with_user) :]
    if user.count(_USER) != 1 or _SYS in user:
        raise fail
    # The reply and its end-of-turn markup come from the engine's tokens: what follows must be the next user
    # turn with the same markup, then the opener.
    head, _, tail = longer.partition(_REPLY)
    if head != sys_only + user + opener or not tail.endswith(user.replace(_USER, _USER2) + opener):
        raise fail
    return (
        _escape(sys_only).replace(_escape(_SYS), "{text}"),
        _escape(user).replace(_escape(_USER), "{text}"),
        opener,  # not a format string (prompt.py appends it as it is)
    )
