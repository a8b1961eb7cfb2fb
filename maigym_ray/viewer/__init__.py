"""The run and trajectory viewer: reads run directories (never whole runs into memory) and serves a local web UI.

No Ray here: the viewer only reads what eval, collect and train wrote (``report.json``, ``metrics.jsonl``,
``results.parquet``, ``trajectories/**/part-*.parquet`` and Hydra's ``.hydra/config.yaml``).
"""
