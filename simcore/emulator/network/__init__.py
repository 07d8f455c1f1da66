"""The analytical network backends of the emulator (congestion-unaware, congestion-aware)."""
