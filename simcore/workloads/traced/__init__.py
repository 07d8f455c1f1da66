"""The traced workload family: graphs built from a recorded PyTorch training step."""
