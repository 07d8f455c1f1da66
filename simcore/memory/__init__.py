"""memory layer of the simulator core."""
