"""Collective algorithms: closed forms, per-step messages and Chakra ET graphs."""
