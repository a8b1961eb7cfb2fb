"""The desktop's home directory, as the guest agent keeps it: restored from its template before each episode,
the one place where commands run and files are read or written (paths that escape it are refused), and owned
by the terminal's user when the desktop has a terminal. What it holds at the end of an episode is what the
verifiers read.
"""

from __future__ import annotations

import asyncio
import os
import pwd
import shutil
import signal
import time
from pathlib import Path
from typing import Any

from maigym_ray.envs.desktop.guest_browser import die_with_parent

_MAX_OUTPUT = 1 << 20


class HomeDir:
    """The home directory ``path``, restored from ``template`` (empty without one); commands run with ``env``;
    with a ``terminal_user`` (and an agent running as root) that user owns the tree."""

    def __init__(
        self, path: Path, template: Path | None, env: dict[str, str], terminal_user: str | None = None
    ) -> None:
        self.path = path.resolve()
        self.template = template.resolve() if template else None
        self.env = env
        self.terminal_user = terminal_user

    def give_to_terminal(self) -> None:
        """With a terminal, its user owns the home tree, so shell commands can work there like the editor."""
        if self.terminal_user is None or os.geteuid() != 0:
            return
        try:
            pw = pwd.getpwnam(self.terminal_user)
        except KeyError:
            return
        for root, dirs, names in os.walk(self.path):
            for name in [*dirs, *names]:
                os.lchown(os.path.join(root, name), pw.pw_uid, pw.pw_gid)
        os.chown(self.path, pw.pw_uid, pw.pw_gid)

    def restore(self) -> None:
        """Makes the home directory an exact copy of the template (empty without one)."""
        self.path.mkdir(parents=True, exist_ok=True)
        for child in self.path.iterdir():
            if child.is_dir() and not child.is_symlink():
                shutil.rmtree(child)
            else:
                child.unlink()
        if self.template is not None and self.template.is_dir():
            shutil.copytree(self.template, self.path, symlinks=True, dirs_exist_ok=True)
        self.give_to_terminal()

    async def run_command(
        self,
        argv: list[str] | str,
        timeout_s: float = 30.0,
        shell: bool = False,
        cwd: str = "",
        stdin: str = "",
    ) -> dict[str, Any]:
        """Runs a command in the desktop (as the session user, in home); kills its group on timeout."""
        workdir = self.resolve(cwd) if cwd else self.path
        if workdir is None:
            raise PermissionError(f"cwd {cwd!r} is outside the home directory")
        if shell:
            cmd = argv if isinstance(argv, str) else " ".join(argv)
            proc = await asyncio.create_subprocess_shell(
                cmd,
                cwd=workdir,
                env=self.env,
                stdin=asyncio.subprocess.PIPE,
                stdout=asyncio.subprocess.PIPE,
                stderr=asyncio.subprocess.PIPE,
                start_new_session=True,
                preexec_fn=die_with_parent,
            )
        else:
            if isinstance(argv, str) or not argv:
                raise ValueError("argv must be a non-empty list (or pass shell=true with a command string)")
            proc = await asyncio.create_subprocess_exec(
                *argv,
                cwd=workdir,
                env=self.env,
                stdin=asyncio.subprocess.PIPE,
                stdout=asyncio.subprocess.PIPE,
                stderr=asyncio.subprocess.PIPE,
                start_new_session=True,
                preexec_fn=die_with_parent,
            )
        t0 = time.perf_counter()
        try:
            out, err = await asyncio.wait_for(proc.communicate(stdin.encode()), timeout_s)
            timed_out = False
        except TimeoutError:
            try:
                os.killpg(proc.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
            out, err = await proc.communicate()
            timed_out = True
        return {
            "rc": proc.returncode,
            "stdout": out[:_MAX_OUTPUT].decode(errors="replace"),
            "stderr": err[:_MAX_OUTPUT].decode(errors="replace"),
            "timed_out": timed_out,
            "seconds": time.perf_counter() - t0,
        }

    def resolve(self, path: str) -> Path | None:
        """``path`` (relative to home, ``~/...`` or absolute) resolved inside home; None when it escapes."""
        p = Path(path[2:] if path.startswith("~/") else ("" if path == "~" else path))
        full = (p if p.is_absolute() else self.path / p).resolve()
        return full if full == self.path or self.path in full.parents else None

    def files(self, max_bytes: int = 65536, hidden: bool = False) -> list[dict[str, str]]:
        """Small UTF-8 text files under home as ``{"path": relpath, "content": text}``, sorted by path."""
        out = []
        for root, dirs, names in os.walk(self.path):
            if not hidden:
                dirs[:] = [d for d in dirs if not d.startswith(".")]
            for name in names:
                if not hidden and name.startswith("."):
                    continue
                p = Path(root) / name
                try:
                    if p.is_symlink() or not p.is_file() or p.stat().st_size > max_bytes:
                        continue
                    text = p.read_bytes().decode("utf-8")
                except (OSError, UnicodeDecodeError):
                    continue
                out.append({"path": p.relative_to(self.path).as_posix(), "content": text})
        return sorted(out, key=lambda f: f["path"])
