"""Hydra entry points: the only place that reads config objects and builds the system from them."""
