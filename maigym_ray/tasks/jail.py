"""A bubblewrap jail for untrusted Python, with a hard wall-clock deadline and one unforgeable reply channel.

:func:`run_jailed` runs a Python program under ``bwrap`` (Debian package ``bubblewrap``):

- new PID, network, IPC, UTS and cgroup namespaces: no network at all (not even loopback to the host's
  services), no view of the host's processes, a fresh ``/proc`` that shows only the jail;
- a filesystem of read-only binds of ``/usr`` and the interpreter's prefix only, a fresh minimal ``/dev`` and a
  ``tmpfs`` ``/tmp``; no ``/etc``, ``/home``, ``/root``, ``/work`` or ``/proc`` of the host;
- uid/gid 65534 (``nobody``) with no capabilities, no supplementary groups and ``no_new_privs``. As root,
  bwrap sets up the namespaces privileged and ``setpriv`` drops to the real kernel uid 65534 (so
  ``RLIMIT_NPROC`` applies: the kernel exempts uid 0 from it); as another user, an unprivileged user namespace
  maps uid 65534 onto the caller;
- rlimits on CPU time, address space, processes, open files and file size;
- ``--die-with-parent``, and the jail's PID 1 (bwrap's init) ends the whole PID namespace when the program
  exits, so no daemon and no detached grandchild outlives it.

The deadline cannot be stretched by the program: the parent reads its pipes with ``select`` against one
monotonic deadline and, when it passes, kills the jail's process group (bwrap dies, its init follows through
``PR_SET_PDEATHSIG``, and the kernel kills the namespace); nothing afterwards waits on a pipe that a survivor
could hold open.

The reply comes back on a dedicated pipe (``reply_fd``, passed as ``argv[1]``) as one frame: a 4-byte big-endian
length and that many bytes. It is accepted only if the jail exited with status 0 before the deadline and the
pipe carried exactly one whole frame; stdout and stderr are logs. Keeping untrusted code away from that pipe is
the program's job (see :mod:`maigym_ray.tasks.sandbox`: it runs the code in a forked child with the pipe
closed, from a parent that is not ptrace-able).

If bwrap is missing or cannot create the namespaces, :func:`run_jailed` raises :class:`TaskError` that names the
fix; there is no unjailed fallback.
"""

from __future__ import annotations

import functools
import os
import resource
import selectors
import shutil
import signal
import struct
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

from maigym_ray.errors import TaskError

#: The uid and gid that jailed code runs as (``nobody``).
JAIL_UID = 65534
#: The largest reply frame accepted, in bytes; a longer reply is rejected, not truncated.
MAX_REPLY = 1 << 20
#: How much of stdout and stderr is kept for error messages, in bytes each; the rest is read and dropped.
MAX_LOG = 16 << 10
_FRAME = struct.Struct(">I")
_FIX = (
    "code verifiers run only inside a bubblewrap jail: install it (`apt-get install bubblewrap`, or run "
    "scripts/setup.sh) and run where namespaces can be created (as root, or with unprivileged user namespaces "
    "enabled: sysctl kernel.unprivileged_userns_clone=1 / user.max_user_namespaces > 0)"
)


@dataclass(frozen=True)
class JailLimits:
    """Resource limits of one jailed run."""

    #: wall-clock deadline for the whole run (jail start-up included), in seconds
    timeout_s: float = 2.0
    #: address-space limit of each process in the jail, in MiB
    memory_mb: int = 256
    #: most processes (threads included) that uid 65534 may hold; shared by concurrent jails
    nproc: int = 64
    #: most open files per process
    nofile: int = 64
    #: largest file a jailed process may write (only /tmp, a tmpfs, is writable), in MiB
    fsize_mb: int = 1


@dataclass(frozen=True)
class JailResult:
    """What came back from a jail that exited cleanly within its deadline with exactly one reply frame."""

    #: the reply frame's payload
    reply: bytes
    #: the tail of the jail's stdout (a log, never a verdict)
    stdout: str
    #: the tail of the jail's stderr
    stderr: str


def _interpreter_paths() -> list[str]:
    """Host paths the interpreter needs besides /usr: its prefix(es) and the real executable's prefix. A venv's
    ``python`` is a symlink into the base install, so the base prefix is what must be bound, not the venv."""
    real = os.path.realpath(sys.executable)
    want = {
        os.path.realpath(sys.base_prefix),
        os.path.realpath(sys.base_exec_prefix),
        os.path.dirname(os.path.dirname(real)),
    }
    out: list[str] = []
    for path in sorted(want):
        if path == "/usr" or path.startswith("/usr/") or any(path.startswith(p + "/") for p in out):
            continue  # /usr is bound whole; nested prefixes ride on their parent's bind
        out.append(path)
    return out


def _argv(program: str, reply_fd: int) -> list[str]:
    bwrap = shutil.which("bwrap")
    if bwrap is None:
        raise TaskError(f"bubblewrap (bwrap) is not installed; {_FIX}")
    python = os.path.realpath(sys.executable)
    argv = [bwrap, "--die-with-parent", "--new-session", "--clearenv", "--setenv", "PATH", "/usr/bin:/bin"]
    argv += ["--unshare-pid", "--unshare-net", "--unshare-ipc", "--unshare-uts", "--unshare-cgroup-try"]
    argv += ["--hostname", "jail", "--ro-bind", "/usr", "/usr"]
    for link in ("bin", "lib", "lib64", "sbin"):  # merged-/usr layouts: /lib -> usr/lib etc.
        host = f"/{link}"
        if os.path.islink(host):
            argv += ["--symlink", os.readlink(host), host]
        elif os.path.isdir(host):
            argv += ["--ro-bind", host, host]
    for path in _interpreter_paths():
        argv += ["--ro-bind", path, path]
    argv += ["--proc", "/proc", "--dev", "/dev", "--tmpfs", "/tmp", "--chdir", "/tmp"]
    if os.geteuid() == 0:
        # privileged namespaces, then a real drop to uid 65534 with no capabilities left anywhere
        setpriv = shutil.which("setpriv") or "/usr/bin/setpriv"
        argv += ["--", setpriv, f"--reuid={JAIL_UID}", f"--regid={JAIL_UID}", "--clear-groups"]
        argv += ["--inh-caps=-all", "--bounding-set=-all", "--no-new-privs"]
    else:
        argv += ["--unshare-user", "--uid", str(JAIL_UID), "--gid", str(JAIL_UID), "--cap-drop", "ALL", "--"]
    return [*argv, python, "-I", "-S", "-c", program, str(reply_fd)]


def _limits(limits: JailLimits) -> None:
    # Runs in the child before exec: bwrap and everything it starts inherit these. The CPU limit (soft: SIGXCPU,
    # hard: SIGKILL a second later) backs up the wall clock; RLIMIT_NPROC only bites once setpriv drops to
    # 65534, which is the point (bwrap itself, as root, needs to fork).
    cpu = max(1, int(limits.timeout_s + 0.999)) + 1
    resource.setrlimit(resource.RLIMIT_CPU, (cpu, cpu + 1))
    resource.setrlimit(resource.RLIMIT_AS, (limits.memory_mb << 20, limits.memory_mb << 20))
    resource.setrlimit(resource.RLIMIT_NPROC, (limits.nproc, limits.nproc))
    resource.setrlimit(resource.RLIMIT_NOFILE, (limits.nofile, limits.nofile))
    resource.setrlimit(resource.RLIMIT_FSIZE, (limits.fsize_mb << 20, limits.fsize_mb << 20))
    resource.setrlimit(resource.RLIMIT_CORE, (0, 0))


def _children(pid: int) -> list[int]:
    try:
        return [int(c) for c in Path(f"/proc/{pid}/task/{pid}/children").read_text().split()]
    except (OSError, ValueError):
        return []


def _gone(pid: int) -> bool:
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] in ("Z", "X")
    except (OSError, IndexError):
        return True


def _kill(proc: subprocess.Popen[bytes]) -> None:
    # bwrap's only child is the jail's init (PID 1 of the namespace). When bwrap dies, PR_SET_PDEATHSIG kills
    # that init, and the kernel kills and reaps everything in the namespace before the init turns into a
    # zombie. That happens asynchronously, so wait (bounded) for it: no jailed process outlives this call.
    inits = _children(proc.pid)
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass
    try:
        proc.kill()
    except ProcessLookupError:
        pass
    proc.wait()
    end = time.monotonic() + 2.0
    while inits and time.monotonic() < end:
        inits = [pid for pid in inits if not _gone(pid)]
        time.sleep(0.005)


def run_jailed(program: str, request: bytes, limits: JailLimits | None = None) -> JailResult:
    """Runs ``program`` (``python -I -S -c program REPLY_FD``) in the jail with ``request`` on its stdin.

    Returns the single reply frame; raises TaskError when the jail is unavailable, the deadline passes, the jail
    exits non-zero, or the reply channel does not carry exactly one whole frame."""
    limits = limits or JailLimits()
    deadline = time.monotonic() + limits.timeout_s
    stdin = os.memfd_create("maigym_jail_request", 0)  # a file, not a pipe: no writer to deadlock
    os.write(stdin, request)
    os.lseek(stdin, 0, os.SEEK_SET)
    reply_r, reply_w = os.pipe()
    try:
        try:
            proc = subprocess.Popen(
                _argv(program, reply_w),
                stdin=stdin,
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                pass_fds=(reply_w,),
                env={"PATH": "/usr/bin:/bin"},
                start_new_session=True,  # one process group to kill, whatever the program does
                preexec_fn=lambda: _limits(limits),
            )
        except OSError as exc:
            raise TaskError(f"could not start the verifier jail ({exc}); {_FIX}") from None
    finally:
        os.close(stdin)
        os.close(reply_w)  # only the jail holds the write end now: EOF means it is gone or done
    assert proc.stdout is not None and proc.stderr is not None
    bufs: dict[int, bytearray] = {proc.stdout.fileno(): bytearray(), proc.stderr.fileno(): bytearray()}
    reply = bytearray()
    overflow = False
    timed_out = False
    sel = selectors.DefaultSelector()
    try:
        for fd in (*bufs, reply_r):
            os.set_blocking(fd, False)
            sel.register(fd, selectors.EVENT_READ)
        while sel.get_map():
            left = deadline - time.monotonic()
            if left <= 0:
                timed_out = True
                break
            for key, _ in sel.select(left):
                chunk = os.read(key.fd, 65536)
                if not chunk:
                    sel.unregister(key.fd)
                elif key.fd == reply_r:
                    reply += chunk
                    if len(reply) > MAX_REPLY + _FRAME.size:
                        overflow = True
                        reply.clear()  # keep reading (and dropping) so the writer does not block
                elif len(bufs[key.fd]) < MAX_LOG:
                    bufs[key.fd] += chunk[: MAX_LOG - len(bufs[key.fd])]
        if not timed_out:
            try:
                proc.wait(timeout=max(0.0, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                timed_out = True
    finally:
        sel.close()
        if timed_out or proc.returncode is None:
            _kill(proc)
        os.close(reply_r)
        proc.stdout.close()
        proc.stderr.close()
    out_log, err_log = (bytes(b).decode(errors="replace") for b in bufs.values())  # stdout, then stderr
    if timed_out:
        raise TaskError(f"jailed verifier timed out after {limits.timeout_s:.1f} s and was killed")
    if proc.returncode in (-signal.SIGXCPU, -signal.SIGKILL):
        raise TaskError("jailed verifier hit its CPU-time limit and was killed")
    if proc.returncode != 0:
        if "bwrap:" in err_log or "setpriv:" in err_log:
            raise TaskError(f"the verifier jail could not start: {err_log[-300:].strip()}; {_FIX}")
        raise TaskError(f"jailed verifier died (exit status {proc.returncode}): {err_log[-300:].strip()}")
    if overflow:
        raise TaskError(f"jailed verifier's reply exceeds {MAX_REPLY} bytes; rejected")
    if len(reply) < _FRAME.size:
        raise TaskError(f"jailed verifier sent no reply (stdout: {out_log[-200:]!r})")
    (size,) = _FRAME.unpack_from(reply)
    if size > MAX_REPLY or len(reply) != _FRAME.size + size:
        raise TaskError("jailed verifier's reply channel did not carry exactly one whole frame; rejected")
    return JailResult(bytes(reply[_FRAME.size :]), out_log, err_log)


@functools.cache
def _probe() -> None:
    run_jailed("import os,sys;os.write(int(sys.argv[1]), b'\\0\\0\\0\\2ok')", b"", JailLimits(timeout_s=10.0))


def check_jail() -> None:
    """Raises TaskError naming the fix if the jail cannot run here (checked once per process, then cached)."""
    try:
        _probe()
    except TaskError as exc:
        raise TaskError(f"the verifier jail does not work on this machine: {exc}") from None
