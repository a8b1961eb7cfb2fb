"""The agent harness shared by eval, collection and RL (plain Python, no Ray)."""
