"""``simsweep ui [--host H] [--port P] [--uri URI]``: the MLflow UI on the local tracking store.

Serves ``<repo or cwd>/.simsweep/mlflow.db`` (the default store of ``simsweep sweep``) with its
artifacts, on 127.0.0.1:5000 unless told otherwise, and prints one link per experiment: its
runs table in the saved view of its latest sweep or study (child runs flat, sorted by the
objective, axis and metric columns shown). The process becomes the MLflow server (exec):
one uvicorn worker and no MLflow job runner (its queue consumers, one process each, serve
GenAI jobs a runs table never starts); Ctrl-C stops it.
"""

from __future__ import annotations

import os
import sys

from search.commands.usage import print_help, wants_help
from search.quiet import server_warning_env

__all__ = ["main", "server_env", "ui_command"]

#: MLflow's switch for its job runner (``mlflow.environment_variables``)
_JOB_EXECUTION = "MLFLOW_SERVER_ENABLE_JOB_EXECUTION"


def ui_command(argv: list[str]) -> list[str]:
    """The ``mlflow ui`` command line for ``argv``."""
    from search.tracking.client import default_store

    opts = {"--host": "127.0.0.1", "--port": "5000", "--uri": None}
    it = iter(argv)
    for arg in it:
        key, _, value = arg.partition("=")
        if key not in opts:
            raise SystemExit(f"simsweep ui: unknown option {arg!r} (use --host, --port, --uri)")
        opts[key] = value or next(it, None)
    uri, artifacts = default_store()
    # one server process (MLflow's default of 4 takes tens of seconds to start on a small
    # machine; one serves a local browser), uvicorn's per-request INFO lines off
    cmd = [sys.executable, "-m", "mlflow", "ui", "--host", str(opts["--host"]),
           "--port", str(opts["--port"]), "--workers", "1",
           "--uvicorn-opts", "--log-level warning",
           "--backend-store-uri", opts["--uri"] or uri]
    if opts["--uri"] is None:
        cmd += ["--default-artifact-root", artifacts]
    return cmd


_OPTIONS = [("--host HOST", "address to serve on (default 127.0.0.1)"),
            ("--port PORT", "port (default 5000)"),
            ("--uri URI", "tracking store (default .simsweep/mlflow.db with its artifacts)")]

def server_env(env: dict[str, str]) -> dict[str, str]:
    """The MLflow server's environment: ``env`` without third-party deprecation notices
    (:mod:`search.quiet`) and with MLflow's job runner off unless ``env`` sets it. The runner
    starts a queue consumer process per job kind beside the server; they double its start-up
    on a small machine, and a SIGINT to the server's PID alone leaves them orphaned, busy,
    for about a minute."""
    return {_JOB_EXECUTION: "false", **server_warning_env(env)}


def _experiment_links(store: str, base: str) -> list[tuple[str, str]]:
    """(experiment name, runs-table link) of every experiment in a local store."""
    if not store.startswith("sqlite:"):
        return []
    from search.tracking.client import latest_view, quiet_mlflow_logs, ui_link

    quiet_mlflow_logs()
    from mlflow import MlflowClient

    out = []
    for exp in MlflowClient(store).search_experiments():
        kind = "trial" if exp.name.startswith("search-") else "point"
        out.append((exp.name, ui_link(base, exp.experiment_id, kind, "iteration_time_s",
                                      view=latest_view(exp))))
    return out


def main(argv: list[str]) -> int:
    """Run the MLflow UI until interrupted."""
    if wants_help(argv):
        return print_help("simsweep ui", __doc__ or "", _OPTIONS)
    cmd = ui_command(argv)
    from search.tracking.client import ui_link

    base = f"http://{cmd[cmd.index('--host') + 1]}:{cmd[cmd.index('--port') + 1]}"
    store = cmd[cmd.index('--backend-store-uri') + 1]
    print(f"MLflow UI on {ui_link(base)} (store {store}); Ctrl-C to stop", flush=True)
    for name, link in _experiment_links(store, base):
        print(f"  {name}: {link}", flush=True)
    sys.stdout.flush()
    # become the MLflow server (signals reach it directly)
    os.execve(cmd[0], cmd, server_env(dict(os.environ)))
