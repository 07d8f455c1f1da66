"""ASTRA-sim-compatible event-driven emulation: system layer, workload layer and run driver.

Reproduces ASTRA-sim 2.x's analytical backends on unmodified inputs (Chakra ET workloads, system
JSON, network YAML, remote-memory and comm-group JSON); see reference/astra-sim-and-chakra.md."""
