"""``simsweep sync <output_dir>... [--uri URI]``: log sweep results kept on disk to MLflow.

For sweeps that ran while the tracking server was unreachable (``tracking_synced: false`` in the
folder's ``sweep.json``), or that were interrupted. Idempotent: runs are found by their tags
(:mod:`search.tracking.client`), so syncing twice creates nothing new; runs a kill cut off are
finished or replaced. An unreachable store is a one-line error (exit 2); a later sync completes
the work. A search folder is logged by resuming its search (``search.resume=true``).
"""

from __future__ import annotations

from pathlib import Path

from search.commands.usage import print_help, wants_help
from simcore.errors import InputError

__all__ = ["main"]


_OPTIONS = [("OUTPUT_DIR ...", "sweep folders (holding sweep.json) to log"),
            ("--uri URI", "MLflow store or server (default: the URI the sweep recorded)")]

def main(argv: list[str]) -> int:
    """Publish each given sweep folder; print what was logged."""
    if not argv or wants_help(argv):
        print_help("simsweep sync", __doc__ or "", _OPTIONS)
        return 0 if argv else 2
    folders, uri = _arguments(argv)
    for folder in folders:
        _check_sweep_folder(folder)
    from search.sweep.finish import publish_folder

    for folder in folders:
        counts = publish_folder(folder.resolve(), uri)
        print(f"{folder}: {counts['points']} points; logged {counts['children']} child runs "
              f"and {counts['artifacts']} artifacts")
    return 0


def _arguments(argv: list[str]) -> tuple[list[Path], str | None]:
    """(sweep folders, ``--uri`` or None) from ``argv``.

    Raises:
        InputError: ``--uri`` without its value, an unknown option, or no folder.
    """
    uri = None
    folders: list[Path] = []
    it = iter(argv)
    for arg in it:
        key, eq, value = arg.partition("=")
        if key == "--uri":
            uri = value if eq else next(it, None)
            if not uri or uri.startswith("--"):
                raise InputError("--uri", uri, "needs a value, e.g. --uri "
                                 "sqlite:////abs/path/mlflow.db or --uri http://127.0.0.1:5000")
        elif arg.startswith("-"):
            raise InputError("option", arg, "unknown; the options are --uri URI and -h")
        else:
            folders.append(Path(arg))
    if not folders:
        raise InputError("output_dir", None, "needs at least one sweep folder: "
                         "simsweep sync <output_dir>... [--uri URI]")
    return folders, uri


def _check_sweep_folder(folder: Path) -> None:
    """Refuse a folder that is not a sweep folder, naming what it is and what to do.

    Raises:
        InputError: no ``sweep.json`` in ``folder``.
    """
    if (folder / "sweep.json").is_file():
        return
    if _is_study(folder):
        raise InputError("output_dir", str(folder), "a search folder, not a sweep folder: "
                         "rerun its `simsweep search` with search.resume=true to log "
                         "its missing trials")
    inside = sorted(p for p in folder.iterdir() if p.is_dir()) if folder.is_dir() else []
    studies = [p for p in inside if _is_study(p)]
    sweeps = [p for p in inside if (p / "sweep.json").is_file()]
    if studies:
        raise InputError("output_dir", str(folder), "a search's output folder, not a sweep "
                         f"folder: its study folder(s) {_names(studies)} hold the trials; "
                         "rerun its `simsweep search` with search.resume=true to log "
                         "their missing trials")
    if sweeps:
        raise InputError("output_dir", str(folder), "not a sweep folder (no sweep.json); "
                         f"the sweep folders inside: {_names(sweeps)}: sync those")
    raise InputError("output_dir", str(folder), "not a sweep folder (no sweep.json)")


def _is_study(folder: Path) -> bool:
    """A search's study folder: its Optuna journal or SQLite storage."""
    return any(folder.glob("*.journal")) or (folder / "optuna.db").is_file()


def _names(folders: list[Path], most: int = 5) -> str:
    """The first ``most`` of ``folders``, and how many more."""
    text = ", ".join(str(p) for p in folders[:most])
    return text + (f" and {len(folders) - most} more" if len(folders) > most else "")
