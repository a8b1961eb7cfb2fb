"""The desktop guest agent on a real Xvfb display: bearer auth, home confinement of files, exec timeouts."""

from __future__ import annotations

import os
import secrets
import shutil
import subprocess
import sys
import time

import pytest

from maigym_ray.envs.desktop.client import AgentClient
from maigym_ray.envs.desktop.provider import AgentEndpoint
from maigym_ray.errors import BackendError

pytestmark = pytest.mark.unit

if shutil.which("Xvfb") is None:
    pytest.skip("Xvfb is not installed (scripts/setup.sh installs it)", allow_module_level=True)


@pytest.fixture(scope="module")
def agent(tmp_path_factory):
    """An agent (without the session browser, to stay quick) on its own Xvfb display."""
    yield from _run_agent(tmp_path_factory.mktemp("agent"))


def _run_agent(tmp, extra: tuple[str, ...] = (), wm: bool = False):
    (tmp / "template" / "docs").mkdir(parents=True)
    (tmp / "template" / "docs" / "a.txt").write_text("alpha\n")
    token = secrets.token_urlsafe(16)
    (tmp / "token").write_text(token)
    rfd, wfd = os.pipe()
    xvfb = subprocess.Popen(
        ["Xvfb", "-displayfd", str(wfd), "-screen", "0", "640x480x24", "-nolisten", "tcp"],
        pass_fds=(wfd,),
        stderr=subprocess.DEVNULL,
        start_new_session=True,
    )
    os.close(wfd)
    out = b""
    while not out.endswith(b"\n"):  # read the whole line: closing early would SIGPIPE the server
        out += os.read(rfd, 16)
    display = ":" + out.decode().strip()
    os.close(rfd)
    openbox = None
    if wm:  # session windows are found through the window manager's _NET_CLIENT_LIST
        env = {"PATH": os.environ["PATH"], "DISPLAY": display, "HOME": str(tmp)}
        openbox = subprocess.Popen(["openbox", "--sm-disable"], env=env, stderr=subprocess.DEVNULL)
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "maigym_ray.envs.desktop.agent",
            "--display",
            display,
            "--token-file",
            str(tmp / "token"),
            "--home",
            str(tmp / "home"),
            "--home-template",
            str(tmp / "template"),
            "--session-dir",
            str(tmp / "session"),
            "--port-file",
            str(tmp / "port"),
            "--no-browser",
            "--width",
            "640",
            "--height",
            "480",
            *extra,
        ],
        start_new_session=True,
    )
    try:
        deadline = time.monotonic() + 30
        while not (tmp / "port").exists():
            assert proc.poll() is None and time.monotonic() < deadline, "the agent did not start"
            time.sleep(0.05)
        url = f"http://127.0.0.1:{(tmp / 'port').read_text()}"
        yield {"url": url, "token": token, "home": tmp / "home", "tmp": tmp, "display": display}
    finally:
        # Every process goes, even when one is slow to exit: a run left an Xvfb and an agent behind when the
        # agent's wait timed out under load and the rest of this block never ran.
        for p in (proc, openbox, xvfb):
            if p is None:
                continue
            p.terminate()
            try:
                p.wait(10)
            except subprocess.TimeoutExpired:
                p.kill()
                p.wait(10)


def client(agent, token: str | None = None) -> AgentClient:
    return AgentClient(AgentEndpoint(agent["url"], agent["token"] if token is None else token), timeout_s=10)


async def test_every_route_needs_the_token(agent):
    import aiohttp

    async with aiohttp.ClientSession() as http:
        for method, path in [
            ("GET", "/health"),
            ("GET", "/screenshot"),
            ("POST", "/exec"),
            ("GET", "/files"),
            ("GET", "/file?path=docs/a.txt"),
            ("PUT", "/file?path=x"),
            ("POST", "/session/reset"),
        ]:
            async with http.request(method, agent["url"] + path, json={"argv": ["true"]}) as resp:
                assert resp.status == 401, (method, path)
            headers = {"Authorization": "Bearer wrong"}
            async with http.request(method, agent["url"] + path, headers=headers) as resp:
                assert resp.status == 401, (method, path)
    bad = client(agent, "wrong")
    with pytest.raises(BackendError, match="401"):
        await bad.health()
    await bad.close()
    good = client(agent)
    assert (await good.health())["ok"] is True
    png = await good.screenshot()
    assert png.startswith(b"\x89PNG")
    await good.close()


async def test_files_are_confined_to_home(agent):
    c = client(agent)
    try:
        assert await c.files() == [{"path": "docs/a.txt", "content": "alpha\n"}]  # restored from the template
        await c.put_file("notes/new.txt", b"hello")
        assert await c.get_file("notes/new.txt") == b"hello"
        assert await c.get_file("~/notes/new.txt") == b"hello"
        assert await c.get_file(str(agent["home"] / "notes/new.txt")) == b"hello"  # absolute, inside home
        outside = agent["tmp"] / "outside.txt"
        outside.write_text("secret")
        (agent["home"] / "link").symlink_to(agent["tmp"])  # a symlink out of home is no way out
        for path in [
            "../outside.txt",
            str(outside),
            "/etc/passwd",
            "notes/../../outside.txt",
            "link/outside.txt",
        ]:
            with pytest.raises(PermissionError):
                await c.get_file(path)
            with pytest.raises(PermissionError):
                await c.put_file(path, b"pwned")
        assert outside.read_text() == "secret"
        with pytest.raises(FileNotFoundError):
            await c.get_file("notes/missing.txt")
        (agent["home"] / ".hidden").write_text("x")
        (agent["home"] / "big.txt").write_text("x" * 70000)
        assert [f["path"] for f in await c.files()] == ["docs/a.txt", "notes/new.txt"]
        await c.reset_session(keep_browser=True)  # restores home exactly (no browser in this agent)
        assert await c.files() == [{"path": "docs/a.txt", "content": "alpha\n"}]
        assert sorted(p.name for p in agent["home"].iterdir()) == ["docs"]
    finally:
        (agent["home"] / "link").unlink(missing_ok=True)
        await c.close()


async def test_exec_runs_argv_without_a_shell_and_kills_on_timeout(agent):
    c = client(agent)
    try:
        res = await c.run_command(["echo", "$HOME", "a b"])
        assert res == {**res, "rc": 0, "stdout": "$HOME a b\n", "timed_out": False}  # no shell expansion
        res = await c.run_command("echo $HOME", shell=True)
        assert res["stdout"].strip() == str(agent["home"].resolve())
        res = await c.run_command(["sh", "-c", "echo oops >&2; exit 3"])
        assert res["rc"] == 3 and res["stderr"] == "oops\n"
        pid_file = agent["home"] / "pid"
        t0 = time.monotonic()
        res = await c.run_command(["sh", "-c", f"echo $$ > {pid_file}; sleep 30 & wait"], timeout_s=0.5)
        assert res["timed_out"] and res["rc"] != 0 and time.monotonic() - t0 < 5
        pid = int(pid_file.read_text())
        time.sleep(0.1)
        with pytest.raises(ProcessLookupError):  # the whole process group was killed
            os.kill(pid, 0)
        with pytest.raises(BackendError, match="400"):
            await c.run_command("echo not-argv")  # a string without shell=true is refused
        with pytest.raises(PermissionError):
            await c.run_command(["pwd"], cwd="/etc")
    finally:
        await c.close()


async def test_client_raises_backend_error_when_the_agent_is_unreachable():
    c = AgentClient(AgentEndpoint("http://127.0.0.1:9", "t"), timeout_s=2)  # port 9: nothing listens
    with pytest.raises(BackendError, match="failed"):
        await c.health()
    await c.close()


def test_xlib_screenshot_fallback_matches_mss(agent):
    import mss
    import mss.tools

    from maigym_ray.envs.desktop.xwindows import XWindows

    x = XWindows(agent["display"])
    try:
        png = x.screenshot_png()
    finally:
        x.close()
    with getattr(mss, "MSS", mss.mss)(display=agent["display"]) as sct:
        shot = sct.grab(sct.monitors[0])
        assert png == mss.tools.to_png(shot.rgb, shot.size, level=1)  # same pixels, same encoding


async def test_the_terminal_is_off_unless_turned_on(agent):
    c = client(agent)
    assert await c.launch("terminal") == "the terminal is turned off on this desktop"
    await c.close()


def test_the_terminal_is_off_by_default_in_the_config() -> None:
    from maigym_ray.config import DesktopBackendConfig

    assert DesktopBackendConfig().terminal is False and DesktopBackendConfig().terminal_user == "nobody"


@pytest.mark.skipif(
    os.geteuid() != 0 or shutil.which("xterm") is None or shutil.which("openbox") is None,
    reason="needs root, xterm and openbox",
)
async def test_a_turned_on_terminal_runs_unprivileged_in_its_own_session_without_network():
    import tempfile
    from pathlib import Path

    import psutil

    tmp = Path(tempfile.mkdtemp(prefix="maigym_term_"))
    tmp.chmod(0o711)  # as the xvfb provider does: the terminal's user may pass through to home/
    (tmp / "template").mkdir()
    (tmp / "template" / "a.txt").write_text("alpha\n")
    gen = _run_agent(tmp, ("--terminal-user", "nobody"), wm=True)
    info = next(gen)
    c = client(info)
    try:
        assert await c.launch("terminal") == ""
        me = psutil.Process()
        terms = [p for p in psutil.process_iter(["name", "cmdline"]) if p.info["name"] == "xterm"]
        terms = [p for p in terms if any(str(tmp) in a for a in p.environ().values())]
        assert len(terms) == 1, terms
        term = terms[0]
        assert term.uids().real == term.uids().effective == 65534  # nobody, not the actor's root
        assert term.gids().real == 65534 and _groups(term) in ([], ["65534"])  # no other groups
        assert os.getsid(term.pid) != os.getsid(me.pid) and os.getsid(term.pid) != os.getsid(0)
        assert os.readlink(f"/proc/{term.pid}/ns/net") != os.readlink("/proc/self/ns/net")  # no loopback
        assert (tmp / "home" / "a.txt").stat().st_uid == 65534  # it can work in home like the editor
        assert "NoNewPrivs:\t1" in Path(f"/proc/{term.pid}/status").read_text()
    finally:
        await c.close()
        gen.close()
        shutil.rmtree(tmp, ignore_errors=True)


def _groups(proc) -> list[str]:
    from pathlib import Path

    line = next(
        ln for ln in Path(f"/proc/{proc.pid}/status").read_text().splitlines() if ln.startswith("Groups:")
    )
    return line.split()[1:]
