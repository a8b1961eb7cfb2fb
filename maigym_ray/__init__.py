"""maigym_ray: evaluate, collect data for, and train GUI agents through one rollout path on Ray."""

import os as _os

# Ray reads these when it is first imported: a local (single-node) Ray must listen on loopback only, so they are
# set before anything imports ray. Under `ray job submit` (RAY_ADDRESS set) the cluster's own settings apply.
LOOPBACK_ENV = {"RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER": "0", "GLOO_SOCKET_IFNAME": "lo"}
if "RAY_ADDRESS" not in _os.environ:
    for _k, _v in LOOPBACK_ENV.items():
        _os.environ.setdefault(_k, _v)
_os.environ.setdefault("RAY_USAGE_STATS_ENABLED", "0")

__version__ = "0.1.0"
