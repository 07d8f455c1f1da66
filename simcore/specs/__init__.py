"""specs layer of the simulator core."""
