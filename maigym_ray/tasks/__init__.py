"""Tasks: specs, pools on disk, verifiers and golden solutions (plain Python, no Ray)."""
