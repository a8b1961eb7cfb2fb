"""RL: pure math (advantages, losses, packing, sampling) plus the trainer, weight sync and driver actors."""
