"""``simsweep ui [--host H] [--port P] [--uri URI]``: the MLflow UI on the local tracking store.

Serves ``<repo or cwd>/.simsweep/mlflow.db`` (the default store of ``simsweep sweep``) with its
artifacts, on 127.0.0.1:5000 unless told otherwise, and prints one link per experiment: its
runs table in the saved view of its latest sweep or study (child runs flat, sorted by the
objective, axis and metric columns shown). The process becomes the MLflow server (exec):
one uvicorn worker and no MLflow job runner (its queue consumers, one process each, serve
GenAI jobs a runs table never starts); Ctrl-C stops it.
"""

from __future__ import annotations

import errno
import os
import socket
import sys
from pathlib import Path

from search.commands.usage import print_help, wants_help
from search.quiet import server_warning_env
from simcore.errors import InputError, require

__all__ = ["check_port_free", "main", "server_env", "ui_command"]

#: MLflow's switch for its job runner (``mlflow.environment_variables``)
_JOB_EXECUTION = "MLFLOW_SERVER_ENABLE_JOB_EXECUTION"


def ui_command(argv: list[str]) -> list[str]:
    """The ``mlflow ui`` command line for ``argv``.

    Raises:
        InputError: an unknown option, an option without its value, a port outside
            1..65535, or a ``--uri`` that names no store (:func:`_existing_store`).
    """
    opts = _options(argv)
    # one server process (MLflow's default of 4 takes tens of seconds to start on a small
    # machine; one serves a local browser), uvicorn's per-request INFO lines off
    cmd = [sys.executable, "-m", "mlflow", "ui", "--host", opts["--host"],
           "--port", opts["--port"], "--workers", "1",
           "--uvicorn-opts", "--log-level warning"]
    if "--uri" in opts:
        return [*cmd, "--backend-store-uri", _existing_store(opts["--uri"])]
    from search.tracking.client import default_store

    uri, artifacts = default_store()
    return [*cmd, "--backend-store-uri", uri, "--default-artifact-root", artifacts]


def _options(argv: list[str]) -> dict[str, str]:
    """``--host`` / ``--port`` (defaults filled in) and ``--uri`` when given, from ``argv``
    (``--key value`` or ``--key=value``)."""
    opts = {"--host": "127.0.0.1", "--port": "5000"}
    it = iter(argv)
    for arg in it:
        key, eq, value = arg.partition("=")
        if key not in _KEYS:
            raise InputError("option", arg, "unknown; the options are --host, --port, --uri")
        given = value if eq else next(it, None)
        if not given or given.startswith("--"):
            raise InputError(key, given, f"needs a value, e.g. {_KEYS[key]}")
        opts[key] = given
    port = opts["--port"]
    require(port.isdigit() and 1 <= int(port) <= 65535, "--port", port,
            "must be a TCP port number in 1..65535")
    return opts


def _existing_store(uri: str) -> str:
    """``uri`` when it names a store to serve: a SQLite URI of an existing file, or another
    database or server URI. MLflow would create a missing SQLite file (a mistyped path serves
    an empty UI) and takes a plain path for its file store, which it refuses to open.

    Raises:
        InputError: a plain path, or a SQLite file that does not exist.
    """
    if "://" not in uri:
        raise InputError("--uri", uri, "must be a tracking URI, e.g. sqlite:////abs/path/"
                         "mlflow.db (a plain path is MLflow's file store, which it refuses)")
    if uri.startswith("sqlite:///") and uri != "sqlite:///:memory:":
        path = Path(uri[len("sqlite:///"):])
        if not path.is_file():
            raise InputError("--uri", uri, f"no such store: {path} does not exist (a sweep "
                             "creates its store; without --uri the local .simsweep/mlflow.db "
                             "is served)")
    return uri


def check_port_free(host: str, port: int) -> None:
    """Refuse to start where the server could not listen: ``port`` in use on ``host`` (a
    running ``simsweep ui`` or another server), or an address this machine cannot serve on.

    Raises:
        InputError: naming ``--port`` or ``--host``, before anything is printed.
    """
    try:
        family, kind, proto, _, address = socket.getaddrinfo(host, port,
                                                             type=socket.SOCK_STREAM)[0]
        with socket.socket(family, kind, proto) as probe:
            probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)  # as uvicorn binds
            probe.bind(address)
    except OSError as err:
        if err.errno != errno.EADDRINUSE:
            raise InputError("--host", host, f"cannot serve on this address "
                             f"({err.strerror or err})") from None
        what = ("an MLflow server already serves it (open that one, or stop it)"
                if _mlflow_answers(host, port) else "another process listens on it")
        raise InputError("--port", port, f"in use on {host}: {what}; choose another "
                         "--port") from None


def _mlflow_answers(host: str, port: int) -> bool:
    """Whether an MLflow server answers ``/health`` at ``host:port``."""
    import urllib.request

    try:
        with urllib.request.urlopen(f"http://{_url_host(host)}:{port}/health", timeout=2) as r:
            return bool(r.status == 200)
    except OSError:
        return False


def _url_host(host: str) -> str:
    """``host`` as the host part of a URL (an IPv6 address in brackets)."""
    return f"[{host}]" if ":" in host else host


#: the options and an example value of each
_KEYS = {"--host": "--host 127.0.0.1", "--port": "--port 5001",
         "--uri": "--uri sqlite:////abs/path/mlflow.db"}
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

    host, port = cmd[cmd.index("--host") + 1], cmd[cmd.index("--port") + 1]
    check_port_free(host, int(port))
    base = f"http://{_url_host(host)}:{port}"
    store = cmd[cmd.index('--backend-store-uri') + 1]
    print(f"MLflow UI on {ui_link(base)} (store {store}); Ctrl-C to stop", flush=True)
    for name, link in _experiment_links(store, base):
        print(f"  {name}: {link}", flush=True)
    sys.stdout.flush()
    # become the MLflow server (signals reach it directly)
    os.execve(cmd[0], cmd, server_env(dict(os.environ)))
