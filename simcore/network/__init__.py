"""The network wing: collective algorithms (closed forms, per-step messages, Chakra ET graphs)."""
