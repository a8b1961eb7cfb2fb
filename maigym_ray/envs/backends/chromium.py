"""Finding Debian's Chromium (no browser download) and the flags every instance runs it with.

Debian's ``/usr/bin/chromium`` is a shell wrapper that adds flags from /etc/chromium.d (GPU rasterisation, an
extension), so we resolve the real ELF binary.
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path
from typing import Any

from maigym_ray.errors import BackendError

CHROMIUM_FLAGS: tuple[str, ...] = (
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
    "--disable-quic",
    "--disable-extensions",
    "--disable-default-apps",
    "--mute-audio",
    "--hide-scrollbars",
    "--disable-dev-shm-usage",
    # Pages of one browser context on one site share a renderer process. Env instances each have a context of
    # their own, which Chromium never shares a renderer across, so this only joins the pages of a group that
    # shares a context (MiniWoB++ pools with options.share_context): one renderer instead of one each.
    "--process-per-site",
    # With the GPU off, compositing and screenshots are Skia's CPU raster; this only stops the GPU process from
    # also starting SwiftShader, a software GL for WebGL that no page here uses (about 18 MB per node).
    "--disable-software-rasterizer",
    # bfcache would let navigate_back show a page from a previous episode; history is reset per episode too.
    # Playwright already passes --disable-features/--disable-back-forward-cache; a second --disable-features
    # would replace its list (Chromium keeps the last), so none is given here.
)

# Debian's headless shell (package chromium-headless-shell) first: it has no browser UI, so each page costs one
# renderer process. The full browser keeps a hidden omnibox WebUI renderer per context (about 25 MB each).
_CANDIDATES = (
    "/usr/lib/chromium/chromium-headless-shell",
    "/usr/lib/chromium/chromium",
    "/usr/lib/chromium-browser/chromium-browser",
)


def find_chromium(explicit: str = "") -> str:
    """Path of the real Chromium binary: ``explicit``, $MAIGYM_CHROMIUM, Debian's real binary, or PATH."""
    for cand in (explicit, os.environ.get("MAIGYM_CHROMIUM", ""), *_CANDIDATES):
        if cand and Path(cand).is_file() and os.access(cand, os.X_OK):
            return cand
    for name in ("chromium-headless-shell", "chromium", "chromium-browser", "google-chrome"):
        found = shutil.which(name)
        if found:
            return found
    raise BackendError(
        "no Chromium found: run scripts/setup.sh (apt-get install chromium-headless-shell) or set MAIGYM_CHROMIUM"
    )


async def launch_chromium(pw: Any, executable: str = "") -> Any:
    """Debian's Chromium through Playwright (pipe transport, no download, no listening port)."""
    from playwright.async_api import Error as PlaywrightError

    try:
        return await pw.chromium.launch(
            executable_path=find_chromium(executable), args=list(CHROMIUM_FLAGS), headless=True
        )
    except PlaywrightError as exc:
        raise BackendError(f"Chromium failed to launch: {exc}") from exc
