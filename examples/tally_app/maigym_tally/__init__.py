"""A third-party app package for maigym_ray: one app (Tally, a counter) and two tasks, outside the package.

Use it with ``env.apps=[all,maigym_tally.app:TallyApp]`` (with this folder on PYTHONPATH), or install it and
its entry point ``maigym_ray.apps`` registers the app by itself; ``tasks.pool=<this folder>/tasks.jsonl``.
"""
