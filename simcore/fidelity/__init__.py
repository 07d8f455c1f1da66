"""Fidelities: how a compiled workload graph is costed (calibrated to real hardware, or ASTRA-sim)."""
