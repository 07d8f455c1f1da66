"""network layer of the simulator core."""
