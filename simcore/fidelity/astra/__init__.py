"""The ``astra`` fidelity: the direct simulation with ASTRA-sim's analytical costs and issue rules."""
