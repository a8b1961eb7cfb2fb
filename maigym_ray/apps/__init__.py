"""Mocked apps: small server-rendered web apps with resettable, inspectable state (plain Python, no Ray)."""
