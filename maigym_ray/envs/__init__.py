"""Environments: the Backend ABC, backends per platform, the EnvActor and the EnvManager."""
