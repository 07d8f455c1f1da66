"""The ``simsweep`` command: a thin dispatcher to one module per subcommand.

Each subcommand module exposes ``main(argv: list[str]) -> int`` and is imported only when its
command runs, so ``simsweep astra`` never pays for importing Ray or MLflow. Errors a user can fix
(:class:`simcore.InputError`, missing files) are printed as one line on stderr with exit code 2,
never as a traceback.
"""

from __future__ import annotations

import importlib
import sys

from simcore.errors import InputError

# command -> (module, one-line help); the registry is the only place commands are named
COMMANDS: dict[str, tuple[str, str]] = {
    "simulate": ("search.commands.simulate", "simulate one design point and print its breakdown"),
    "sweep": ("search.commands.sweep", "grid / random hardware sweep on Ray, logged to MLflow"),
    "search": ("search.commands.optimize", "Optuna co-design search over parallelization and hardware"),
    "validate": ("search.commands.validate", "predict published training runs and print the error table"),
    "astra": ("search.commands.astra", "run unmodified ASTRA-sim inputs (Chakra ET + system/network JSON/YAML)"),
    "chakra": ("search.commands.chakra", "export / show Chakra execution traces"),
    "trace": ("search.commands.trace", "record a PyTorch model's training step as a Chakra ET (needs simsweep[trace])"),
    "sync": ("search.commands.sync", "log results kept on disk to MLflow (after the server was down)"),
    "ui": ("search.commands.ui", "open the MLflow UI on the local tracking store"),
}


def _usage() -> str:
    lines = ["usage: simsweep <command> [args]", "", "commands:"]
    lines += [f"  {name:<10} {text}" for name, (_, text) in COMMANDS.items()]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    """Entry point of the ``simsweep`` console script."""
    args = list(sys.argv[1:] if argv is None else argv)
    if not args or args[0] in {"-h", "--help", "help"}:
        print(_usage())
        return 0
    name, rest = args[0], args[1:]
    if name not in COMMANDS:
        print(f"simsweep: unknown command {name!r}\n\n{_usage()}", file=sys.stderr)
        return 2
    module = importlib.import_module(COMMANDS[name][0])
    try:
        return int(module.main(rest) or 0)
    except InputError as err:
        print(f"simsweep {name}: error: {err}", file=sys.stderr)
        return 2
    except FileNotFoundError as err:
        print(f"simsweep {name}: error: {err.filename or err}: file not found", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
