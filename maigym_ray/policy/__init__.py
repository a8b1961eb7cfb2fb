"""Policy engines and the tiny local default models they serve."""
