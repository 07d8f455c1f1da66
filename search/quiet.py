"""Third-party warnings kept off the terminal by default.

Model: the orchestration libraries (MLflow and its server stack Starlette / FastAPI / uvicorn,
Ray, Optuna, Hydra / OmegaConf, pydantic, SQLAlchemy, alembic, matplotlib, plotly, polars,
pandas) emit deprecation notices about their own internals (e.g. MLflow 3's server importing
``starlette.middleware.wsgi``, which Starlette marks deprecated with a ``UserWarning``
subclass); a user can do nothing about them. :func:`silence_third_party_warnings` ignores
``DeprecationWarning`` / ``PendingDeprecationWarning`` / ``FutureWarning`` attributed to those
packages and Starlette's deprecation notices, in this process; :func:`server_warning_env` does
the same for a child process (the MLflow server) through ``PYTHONWARNINGS``. Warnings of
simsweep's own code, and every other warning, still show. ``SIMSWEEP_WARNINGS=all`` keeps
everything (for debugging).
"""

from __future__ import annotations

import os
import re
import warnings

__all__ = ["THIRD_PARTY", "server_warning_env", "silence_third_party_warnings"]

#: top-level packages whose deprecation notices are silenced
THIRD_PARTY = ("mlflow", "starlette", "fastapi", "uvicorn", "ray", "optuna", "hydra",
               "omegaconf", "pydantic", "sqlalchemy", "alembic", "matplotlib", "plotly",
               "polars", "pandas", "google", "opentelemetry", "websockets", "flask", "werkzeug")
_MODULES = r"(?:" + "|".join(re.escape(p) for p in THIRD_PARTY) + r")(?:\..*)?"
_CATEGORIES: tuple[type[Warning], ...] = (DeprecationWarning, PendingDeprecationWarning,
                                          FutureWarning)
_STARLETTE = r"starlette\..* is deprecated"


def _enabled() -> bool:
    return os.environ.get("SIMSWEEP_WARNINGS", "").lower() != "all"


def silence_third_party_warnings() -> None:
    """Ignore the third-party deprecation notices described above (this process)."""
    if not _enabled():
        return
    for category in _CATEGORIES:
        warnings.filterwarnings("ignore", category=category, module=_MODULES)
    warnings.filterwarnings("ignore", message=_STARLETTE)


def server_warning_env(env: dict[str, str]) -> dict[str, str]:
    """``env`` with ``PYTHONWARNINGS`` extended so the MLflow server process (all of it
    third-party code) prints no deprecation notices."""
    if not _enabled():
        return env
    rules = ["ignore::DeprecationWarning", "ignore::PendingDeprecationWarning",
             "ignore::FutureWarning", "ignore:starlette.:UserWarning"]
    current = env.get("PYTHONWARNINGS", "")
    return {**env, "PYTHONWARNINGS": ",".join([*([current] if current else []), *rules])}
