"""Grid and random sweeps: plan, axes, driver, output folder, finish, plots."""
