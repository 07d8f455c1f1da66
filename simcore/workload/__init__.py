"""workload layer of the simulator core."""
