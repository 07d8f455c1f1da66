"""The one Hydra composition of a simsweep config (``conf/config.yaml`` plus overrides).

Every command composes through :func:`compose` (``simsweep simulate``, ``chakra export``,
``sweep``, ``search``); :func:`compose_session` binds it to one config folder for the sweep
planner, which composes once per structural combination. Each call initializes Hydra, composes
and clears it again, so no global Hydra state outlives a call. A composition error is one
:class:`~simcore.errors.InputError` line naming the override (``key=value: rule``).
"""

from __future__ import annotations

import os
import re
from collections.abc import Callable, Sequence
from pathlib import Path

from omegaconf import DictConfig

from simcore.errors import InputError

__all__ = ["compose", "compose_session", "config_options", "default_config_dir",
           "split_config_dir"]


def default_config_dir() -> Path:
    """``$SIMSWEEP_CONFIG_DIR``, else the project's ``conf/`` next to the ``search`` package."""
    env = os.environ.get("SIMSWEEP_CONFIG_DIR")
    if env:
        return Path(env)
    here = Path(__file__).resolve().parents[2] / "conf"
    return here if here.is_dir() else Path.cwd() / "conf"


def split_config_dir(argv: list[str]) -> tuple[Path, list[str]]:
    """Pop ``--config-dir DIR`` (or ``--config-dir=DIR``) from ``argv``."""
    rest, conf = [], default_config_dir()
    it = iter(argv)
    for arg in it:
        if arg == "--config-dir":
            conf = Path(next(it, "."))
        elif arg.startswith("--config-dir="):
            conf = Path(arg.split("=", 1)[1])
        else:
            rest.append(arg)
    return conf, rest


def _compose_error(err: Exception, overrides: Sequence[str]) -> InputError:
    """Hydra's composition error as key=value: rule (the override it names, when it does)."""
    text = str(err).split("Config search path")[0]
    lines = [ln.strip() for ln in text.splitlines() if ln.strip()]
    match = re.search(r"override '([^']+)'|'([^'/]+)/([^']+)'", lines[0] if lines else "")
    key, value = "overrides", " ".join(overrides)
    if match and match.group(1):
        key = match.group(1)
        value = next((o.split("=", 1)[1] for o in overrides
                      if o.lstrip("+~").split("=", 1)[0] == key), value)
    elif match:
        key, value = match.group(2), match.group(3)
    return InputError(key, value, " ".join(lines) or type(err).__name__)


def compose(overrides: Sequence[str], config_dir: str | Path | None = None,
            config_name: str = "config") -> DictConfig:
    """The config ``config_name`` of ``config_dir`` (default :func:`default_config_dir`)
    composed with ``overrides`` (Hydra's grammar); errors are one :class:`InputError`."""
    from hydra import compose as hydra_compose
    from hydra import initialize_config_dir
    from hydra.core.global_hydra import GlobalHydra
    from hydra.errors import HydraException

    from search.config.resolvers import register_resolvers
    from search.config.schema import register_configs

    register_configs()
    register_resolvers()
    root = str(Path(config_dir or default_config_dir()).resolve())
    GlobalHydra.instance().clear()
    try:
        with initialize_config_dir(config_dir=root, version_base=None):
            return hydra_compose(config_name=config_name, overrides=list(overrides))
    except HydraException as err:
        raise _compose_error(err, overrides) from None
    except Exception as err:  # omegaconf reports config errors as exceptions
        first = str(err).strip().splitlines()[0] if str(err).strip() else type(err).__name__
        raise InputError("overrides", " ".join(overrides), first) from err
    finally:
        GlobalHydra.instance().clear()


def config_options(group: str, config_dir: str | Path | None = None) -> list[str]:
    """The options of config group ``group`` (``[]`` for a dotted key, which is no group)."""
    from hydra import initialize_config_dir
    from hydra.core.global_hydra import GlobalHydra

    if "." in group:
        return []
    root = str(Path(config_dir or default_config_dir()).resolve())
    GlobalHydra.instance().clear()
    try:
        with initialize_config_dir(config_dir=root, version_base=None):
            return list(GlobalHydra.instance().config_loader().get_group_options(group))
    finally:
        GlobalHydra.instance().clear()


def compose_session(config_dir: str | Path) -> tuple[Callable[[Sequence[str]], DictConfig],
                                                     Callable[[str], list[str]]]:
    """(compose, group options) callables bound to ``config_dir``."""

    def _compose(overrides: Sequence[str]) -> DictConfig:
        return compose(overrides, config_dir)

    def _options(name: str) -> list[str]:
        return config_options(name, config_dir)

    return _compose, _options
