"""``python -m fake_android ARGS`` (in the stand-in container) or ``python -m
maigym_ray.testing.fake_android ARGS``: serves the device the boot arguments and environment describe."""

import asyncio
import sys

from .adbd import serve

asyncio.run(serve(sys.argv[1:]))
