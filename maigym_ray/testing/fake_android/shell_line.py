"""The device shell's command lines: sh quoting rules, ``;`` / ``&&`` / ``||`` and ``>`` / ``2>``
redirections, no expansion: what the Android backend sends through ``adb shell``."""

from __future__ import annotations


def parse_command_line(line: str) -> list[tuple[str, list[str], dict[str, str]]]:
    """Splits a shell line into (operator before, words, redirections) with sh quoting rules (no expansion)."""
    tokens: list[tuple[str, bool]] = []  # (text, is_operator)
    cur, have, i = [], False, 0
    while i < len(line):
        c = line[i]
        if c in " \t\n":
            if have:
                tokens.append(("".join(cur), False))
                cur, have = [], False
        elif c == "'":
            j = line.find("'", i + 1)
            if j < 0:
                raise ValueError("unterminated quote")
            cur.append(line[i + 1 : j])
            have, i = True, j
        elif c == '"':
            i += 1
            while i < len(line) and line[i] != '"':
                if line[i] == "\\" and i + 1 < len(line) and line[i + 1] in '"\\$`':
                    i += 1
                cur.append(line[i])
                i += 1
            if i >= len(line):
                raise ValueError("unterminated quote")
            have = True
        elif c == "\\" and i + 1 < len(line):
            cur.append(line[i + 1])
            have, i = True, i + 1
        elif c in ";&|>":
            op = line[i : i + 2] if line[i : i + 2] in ("&&", "||", ">>") else c
            if op == ">" and have and "".join(cur) == "2" and line[i - 1] == "2":
                cur, have, op = [], False, "2>"
            if have:
                tokens.append(("".join(cur), False))
                cur, have = [], False
            tokens.append((op, True))
            i += len(op) - 1 if op != "2>" else 0
        else:
            cur.append(c)
            have = True
        i += 1
    if have:
        tokens.append(("".join(cur), False))
    commands: list[tuple[str, list[str], dict[str, str]]] = []
    op, words, redirects = ";", [], {}
    it = iter(tokens)
    for text, is_op in it:
        if not is_op:
            words.append(text)
        elif text in (">", ">>", "2>"):
            target = next(it, ("", True))
            if target[1] or not target[0]:
                raise ValueError("syntax error: redirection without a file")
            redirects[">" if text == ">>" else text] = target[0]
        elif text in (";", "&&", "||"):
            commands.append((op, words, redirects))
            op, words, redirects = text, [], {}
        else:
            raise ValueError(f"unsupported shell operator {text!r}")
    commands.append((op, words, redirects))
    return commands
