"""Configuration: one Hydra composition, the group schemas, and the one translation to simcore specs."""
