"""One module per ``simsweep`` subcommand, each with ``main(argv) -> int``."""
