"""traces layer of the simulator core."""
