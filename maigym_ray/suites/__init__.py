"""Adapters for outside task suites (MiniWoB++, ...) that run through the same envs and harness."""
