"""engine layer of the simulator core."""
