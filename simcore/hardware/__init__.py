"""hardware layer of the simulator core."""
