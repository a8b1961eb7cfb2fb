"""Backends, one per platform family: web (Playwright + Chromium), android, desktop."""
