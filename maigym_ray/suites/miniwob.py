"""MiniWoB++ through our web stack: the HTML tasks that ship in the ``miniwob`` wheel, driven by Playwright.

Each task is one HTML page, opened as a file (``file://``; the pages need no server) in the node's shared
Chromium or an env's own, like the mocked apps. An episode is started the way the suite defines it: seed the
page's RNG (``Math.seedrandom``), then ``core.startEpisodeReal()``, then wait for ``WOB_TASK_READY``. The
instruction is the page's (``core.getUtterance()``), shown as the first line of every observation. Reward and
done are the page's globals (``WOB_REWARD_GLOBAL``, ``WOB_RAW_REWARD_GLOBAL``, ``WOB_DONE_GLOBAL``): we never
compute a reward; the ``page_reward`` verifier reads what the page reported. The page's own timer
(``core.EPISODE_MAX_TIME``, 10 s unless the task sets it) ends an episode with raw reward -1, so each task keeps
its own time limit.

A task of the pool is one (task name, seed) pair: ``miniwob.<name>.<seed>``. Pool specs:
``miniwob:all``, ``miniwob:click-button,click-link``, and ``@N`` after either for seeds 0..N-1 (default 1), or
``@N+H`` for training seeds 0..N-1 (split ``train``) and held-out seeds N..N+H-1 (split ``test``): a page draws
its instruction and layout from its seed, so held-out seeds are screens training never saw.
"""

from __future__ import annotations

import importlib.util
from pathlib import Path
from typing import Any, Protocol

from maigym_ray.envs.backend import Backend
from maigym_ray.envs.config import EnvManagerConfig, PoolConfig, WebBackendConfig
from maigym_ray.envs.kinds import browser_page, check_web, web_options
from maigym_ray.envs.registry import BackendKind
from maigym_ray.errors import BackendError, ConfigError, TaskError
from maigym_ray.types import Action, Element, Observation, TaskSpec

#: The viewport MiniWoB++ pages get by default: the task area is 160x210 CSS pixels at the top left, with the
#: page's reward display to its right.
DEFAULT_SIZE = (380, 220)
#: Steps an episode may take (the page's own timer usually ends it first).
DEFAULT_MAX_STEPS = 15
#: Instances per env actor process in :func:`manager_config`'s pool (PoolConfig.instances_per_actor).
GROUP_SIZE = 8

_GLOBALS_JS = """() => ({done: !!WOB_DONE_GLOBAL, reward: Number(WOB_REWARD_GLOBAL),
  raw_reward: Number(WOB_RAW_REWARD_GLOBAL), reason: WOB_REWARD_REASON == null ? null : String(WOB_REWARD_REASON),
  utterance: core.getUtterance(), ready: !!WOB_TASK_READY, max_time_ms: Number(core.EPISODE_MAX_TIME)})"""
# MiniWoB++ makes many targets clickable text (links as <span class="alink">, tree nodes, menu items) that no
# accessibility role marks. Like BrowserGym's ids on every element, we give each such text leaf of the task area
# a stable id (data-mg-id "tN", which the snapshot lists as an element): one that carries text of its own and
# holds no control (a <label> around a checkbox is no target, so the checkbox keeps its own line; a paragraph around
# a tagged word stays text too).
_TAG_JS = """() => {
  const root = document.getElementById('area') || document.body;
  const CONTROL = 'a[href],button,input,textarea,select,[role=button],[role=link],[role=tab],[role=checkbox],[role=radio],[data-mg-id]';
  const fresh = [];
  for (const el of Array.from(root.querySelectorAll('*')).reverse()) {  // leaves first: a parent then holds a tag
    if (el.hasAttribute('data-mg-id') || el.matches(CONTROL) || el.querySelector(CONTROL)) continue;
    if (el.closest('svg') || ['SCRIPT', 'STYLE', 'OPTION', 'BR'].includes(el.tagName)) continue;
    let own = '';
    for (const c of el.childNodes) if (c.nodeType === 3) own += c.textContent;
    if (own.trim()) { el.setAttribute('data-mg-id', ''); fresh.push(el); }
  }
  window.__mgTags = window.__mgTags || 0;
  for (const el of fresh.reverse()) el.setAttribute('data-mg-id', 't' + (++window.__mgTags));  // page order
}"""
_TAG_THEN_GLOBALS_JS = "() => { (" + _TAG_JS + ")(); return (" + _GLOBALS_JS + ")(); }"
# The suite's own start sequence (seed, startEpisodeReal, wait for the task to say it is ready), in one call;
# it also tags the new problem's text leaves, so the observation that follows needs no call of its own for that.
_START_JS = (
    """async (seed) => {
  if (core.cover_div == null) core.startEpisode();  // tasks call it on load; a page that did not yet, now
  Math.seedrandom(seed);
  core.startEpisodeReal();
  for (let i = 0; i < 40 && !WOB_TASK_READY; i++) await new Promise(r => setTimeout(r, 50));
  return ("""
    + _TAG_THEN_GLOBALS_JS
    + """)();
}"""
)


# The next episode of the same task, started in the page already open, the way MiniWoB++'s own environment resets
# (its ``force_stop`` then ``begin_task``: ``core.endEpisode(0)``, ``Math.seedrandom(seed)``,
# ``core.startEpisodeReal()``; ``genProblem`` re-renders the task area). What a reload would also clear is put back
# to a fresh load's state, so the first observation of (task, seed) is the same either way: the reward display
# (last reward, average, episodes done), our element ids (numbered from t1 again) and the focus. null when the page
# is not the task's page any more (the agent navigated away), so the caller reloads.
_RESTART_JS = (
    """async ([seed, url]) => {
  if (typeof core === 'undefined' || typeof genProblem !== 'function' || core.cover_div == null
      || location.href !== url) return null;
  core.endEpisode(0);  // stops the running episode's timers (a no-op when the page already ended it)
  core.wob_latest = '-'; core.wob_scores = []; WOB_EPISODE_ID = 0;
  const hud = document.getElementById('reward-display');
  if (hud) hud.innerHTML = core.DISPLAY_HTML;
  for (const el of document.querySelectorAll('[data-mg-id]')) el.removeAttribute('data-mg-id');
  window.__mgTags = 0;
  if (document.activeElement && document.activeElement !== document.body) document.activeElement.blur();
  return await ("""
    + _START_JS
    + """)(seed);
}"""
)
#: Episodes restarted in the page before the next reset reloads it anyway (MiniWoB++'s ``refresh_freq``): bounds
#: what a task's page may accumulate over many episodes (the renderer's heap, handlers a task binds per episode).
RELOAD_EVERY = 50


def html_dir() -> Path:
    """The folder of the ``miniwob`` wheel's task pages (``miniwob/html/miniwob``)."""
    spec = importlib.util.find_spec("miniwob")
    if spec is None or not spec.submodule_search_locations:
        raise ConfigError("MiniWoB++ is not installed: pip install 'maigym_ray[suites]' (miniwob==1.1.0)")
    return Path(next(iter(spec.submodule_search_locations))) / "html" / "miniwob"


def task_names() -> list[str]:
    """Every task page the wheel ships, by name (``click-button``, ...)."""
    return sorted(p.stem for p in html_dir().glob("*.html"))


def miniwob_task(
    name: str, seed: int = 0, max_steps: int = DEFAULT_MAX_STEPS, split: str = "train"
) -> TaskSpec:
    """The TaskSpec of one MiniWoB++ task at one seed (the page gives the instruction once it runs)."""
    return TaskSpec(
        id=f"miniwob.{name}.{seed}",
        instruction=f"MiniWoB++ task {name}: do what the page's instruction (the first line) says.",
        apps=("miniwob",),
        platforms=("web",),
        initial_state={"miniwob": {"task": name, "seed": seed}},
        verifier={"name": "page_reward", "params": {"suite": "miniwob"}},
        max_steps=max_steps,
        tags=("miniwob", name),
        split=split,
    )


def manager_config(instances: int, screenshot: bool = True) -> EnvManagerConfig:
    """An EnvManager with one MiniWoB++ pool of ``instances`` pages in the node's shared Chromium, the suite's
    own reset (the next episode of the same task restarts in the loaded page: ``reset="restart"``) and up to
    :data:`GROUP_SIZE` instances per env actor process (a page costs little inside its actor, the process
    ~50 MB), whose pages share a browser context and so one renderer process (``share_context``). MiniWoB++
    needs no mocked app; the app host still starts one, the smallest."""
    pool = PoolConfig(
        backend="miniwob",
        target_size=instances,
        max_size=instances,
        recycle_after=0,
        instances_per_actor=max(1, min(instances, GROUP_SIZE)),
        options={"browser": "shared", "screenshot": screenshot, "reset": "restart", "share_context": True},
    )
    return EnvManagerConfig(pools={"miniwob": pool}, apps=["notes"])


def load_pool_spec(spec: str) -> list[TaskSpec]:
    """The tasks of ``miniwob:<names>|all[@N[+H]]``; unknown names are a TaskError listing close ones."""
    if not spec.startswith("miniwob:"):
        raise ConfigError(f"not a MiniWoB++ pool spec: {spec!r} (expected miniwob:<names> or miniwob:all)")
    body = spec.split(":", 1)[1]
    names_part, _, seeds_part = body.partition("@")
    train_part, plus, heldout_part = seeds_part.partition("+")
    try:
        n_seeds = int(train_part) if train_part else 1
        n_heldout = int(heldout_part) if plus else 0
    except ValueError:
        raise ConfigError(
            f"{spec!r}: after @ give a number of seeds, or N+H (training and held-out seeds)"
        ) from None
    if n_seeds < 1 or n_heldout < 0 or (plus and n_heldout < 1):
        raise ConfigError(f"{spec!r}: need at least one training seed (and one held-out seed after +)")
    known = task_names()
    names = known if names_part == "all" else [n.strip() for n in names_part.split(",") if n.strip()]
    if not names:
        raise ConfigError(f"{spec!r} names no task")
    for n in names:
        if n not in known:
            near = [k for k in known if k.split("-")[0] == n.split("-")[0]][:6]
            raise TaskError(f"unknown MiniWoB++ task {n!r}" + (f"; similar: {near}" if near else ""))
    # Seed-major, as the task families' instances: the first K training tasks (driver.sft.tasks) cover every
    # named task, so SFT can demonstrate a few seeds of each while RL samples all of them.
    return [miniwob_task(n, s) for s in range(n_seeds) for n in names] + [
        miniwob_task(n, s, split="test") for s in range(n_seeds, n_seeds + n_heldout) for n in names
    ]


class SuitePage(Protocol):
    """A page handle (LocalPage or RemotePage) that can also run our own scripts in the page."""

    async def open(self, **driver_args: Any) -> None: ...
    async def reset(self, url: str) -> None: ...
    async def observe(self, screenshot: bool = True) -> dict[str, Any]: ...
    async def act(self, action: Action) -> str: ...
    async def evaluate(self, script: str, arg: Any = None) -> Any: ...
    async def health(self) -> bool: ...
    async def close(self) -> None: ...


class MiniwobBackend(Backend):
    """MiniWoB++ task pages in a browser page; state() is what the page's reward globals say."""

    def __init__(self, cfg: WebBackendConfig, page: SuitePage, pages_dir: Path | None = None) -> None:
        self.cfg = cfg
        self.platform = "web"
        self.width, self.height = cfg.width or DEFAULT_SIZE[0], cfg.height or DEFAULT_SIZE[1]
        self.page = page
        self.base_url = (pages_dir or html_dir()).resolve().as_uri()
        self._globals: dict[str, Any] = {}
        self._task: dict[str, Any] = {}
        self._in_page = 0  # episodes started in the page now loaded
        self._tagged = False  # the page's text leaves are tagged and the globals read since the last change
        self._started = False

    async def start(self) -> None:
        if self._started:
            return
        await self.page.open(
            width=self.width,
            height=self.height,
            mobile=False,
            base_url=self.base_url,
            apps=[],
            settle_timeout_s=self.cfg.settle_timeout_s,
            wait_cap_s=self.cfg.wait_cap_s,
            fresh_context=self.cfg.reset == "context",
        )
        self._started = True

    async def reset(self, task: TaskSpec) -> None:
        spec = task.initial_state.get("miniwob")
        if not isinstance(spec, dict) or not isinstance(spec.get("task"), str):
            raise TaskError(f"task {task.id}: a MiniWoB++ task needs initial_state.miniwob.task")
        name, seed = spec["task"], spec.get("seed", 0)
        if not (Path(self.base_url[len("file://") :]) / f"{name}.html").is_file():
            raise TaskError(f"task {task.id}: MiniWoB++ has no task page {name!r}")
        url = f"{self.base_url}/{name}.html"
        restart = (
            self.cfg.reset == "restart"
            and self._task.get("task") == name
            and 0 < self._in_page < RELOAD_EVERY
        )
        self._task = {"task": name, "seed": seed}
        globals_ = await self.page.evaluate(_RESTART_JS, [seed, url]) if restart else None
        if globals_ is None:
            await self.page.reset(url)
            globals_ = await self.page.evaluate(_START_JS, seed)
            self._in_page = 0
        self._in_page += 1
        self._globals = globals_
        self._tagged = True  # the start script tagged the page and read its globals
        if not self._globals.get("ready"):
            raise BackendError(f"MiniWoB++ task {name} did not become ready after startEpisodeReal")

    async def _read_globals(self) -> dict[str, Any]:
        self._globals = await self.page.evaluate(_GLOBALS_JS)
        return self._globals

    async def observe(self) -> Observation:
        # tags, then reads the globals, in one round trip to the page (the snapshot is the second); right after
        # a reset the start script did both
        if not self._tagged:
            self._globals = await self.page.evaluate(_TAG_THEN_GLOBALS_JS)
        self._tagged = False
        snap = await self.page.observe(self.cfg.screenshot)
        return Observation(
            platform=self.platform,
            screenshot=snap["png"],
            width=self.width,
            height=self.height,
            a11y=f'instruction "{self._globals.get("utterance", "")}"\n' + snap["a11y"],
            url=snap["url"],
            app="miniwob",
            elements=tuple(Element(**e) for e in snap["elements"]),
        )

    async def act(self, action: Action) -> str:
        if action.name in ("open_app", "navigate_home", "navigate_back"):
            return f"{action.name}: a MiniWoB++ task is a single page; act on its elements"
        return await self.page.act(action)

    def episode_done(self) -> bool:
        return bool(self._globals.get("done"))

    async def state(self) -> dict[str, Any]:
        # in_page: the episodes started in the loaded page, this one included (1 right after a load)
        return {"miniwob": {**self._task, **await self._read_globals(), "in_page": self._in_page}}

    async def health(self) -> bool:
        return await self.page.health()

    async def close(self) -> None:
        await self.page.close()


def build_backend(
    pool: PoolConfig, apps: list[str], app_bind: str = "127.0.0.1", node: Any = None
) -> Backend:
    """The ``miniwob`` backend kind's builder (this package's entry point, group ``maigym_ray.backends``): the
    pool's web settings, the node's shared Chromium when it has one, else a Chromium of this process. It hosts
    no mocked apps."""
    options = web_options(pool)
    return MiniwobBackend(options, browser_page(options, node))


def check_pool(pool: PoolConfig, options: WebBackendConfig, where: str) -> None:
    """A miniwob pool's web settings: as a web pool's, and its pages may share a browser context."""
    check_web(pool, options, where, share_context=True)


KIND = BackendKind(build=build_backend, check=check_pool, uses_browser=True, options=WebBackendConfig)
