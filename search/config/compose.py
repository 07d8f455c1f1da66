"""The one Hydra composition of a simsweep config (``conf/config.yaml`` plus overrides).

Every command composes through :func:`compose` (``simsweep simulate``, ``chakra export``,
``sweep``, ``search``); :func:`compose_session` binds it to one config folder for the sweep
planner. Each call initializes Hydra, composes and clears it again, so no global Hydra state
outlives a call. A composition error is one :class:`~simcore.errors.InputError` line naming the
override (``key=value: rule``).

:func:`with_value_overrides` gives what a composition with more overrides would give when those
are plain values (``parallel.tp=4``) without composing again: Hydra composes the defaults list
(config groups), sets struct mode, then applies each value override in order as
``OmegaConf.update(cfg, key, value, merge=True)`` (``hydra._internal.config_loader_impl``,
``_apply_overrides_to_config``, hydra-core 1.3), so a copy of the composed config updated the
same way is the same config. A composition costs ~0.13 s (it reads the YAML files and
rebuilds the defaults tree); the copy and updates ~5 ms. The sweep planner derives a
structural combination that chooses a config group this way (``search.sweep.plan._Derived``;
one of plain values only is set in plain dicts, cheaper still).
"""

from __future__ import annotations

import functools
import os
import re
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from omegaconf import DictConfig

from simcore.errors import InputError

__all__ = ["compose", "compose_session", "config_options", "default_config_dir",
           "split_config_dir", "split_value_overrides", "value_items", "with_value_overrides"]


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
    merging = re.match(r"Error merging override ([^=\s]+)=(.*)$", lines[0] if lines else "")
    if merging and err.__cause__ is not None:  # OmegaConf's reason, and where: not every override
        cause = [ln.strip() for ln in str(err.__cause__).splitlines() if ln.strip()]
        where = next((ln.split(":", 1)[1].strip() for ln in cause if ln.startswith("full_key:")),
                     "")
        rule = (cause[0] if cause else type(err.__cause__).__name__) + (f" ({where})" if where else "")
        return InputError(merging.group(1), merging.group(2), f"cannot set it: {rule}")
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


@functools.lru_cache(maxsize=4096)
def _parsed(text: str) -> Any:
    """Hydra's parse of one override (a sweep's structural values repeat across combinations;
    a parse costs ~0.5 ms). Overrides are not changed after parsing."""
    from hydra.core.override_parser.overrides_parser import OverridesParser

    return OverridesParser.create().parse_override(text)


def _is_plain_value(ov: Any) -> bool:
    from hydra.core.override_parser.types import OverrideType

    key = ov.key_or_group
    return bool(ov.type == OverrideType.CHANGE and ov.package is None and "." in key
                and "/" not in key and not ov.is_sweep_override())


def split_value_overrides(overrides: Sequence[str]) -> tuple[tuple[str, ...], tuple[str, ...]]:
    """(the others, the plain value overrides) of ``overrides``, each in order.

    A plain value override sets a dotted key (``parallel.tp=4``: a dotted key names no config
    group) to one value, with no ``+`` / ``++`` / ``~`` prefix and no ``@package``; the rest
    (config group choices, top-level keys, additions, deletions) need Hydra's defaults list.
    A value override whose key equals, lies under or holds another kind's key (``a.b=1`` and
    ``a=...``, ``parallel.tp=2`` and ``~parallel.tp``) counts with the others, so the two keep
    their order."""
    parsed = [(text, _parsed(text)) for text in overrides]
    held = [ov.key_or_group for _, ov in parsed if not _is_plain_value(ov)]

    def related(key: str) -> bool:
        return any(key == k or key.startswith(k + ".") or k.startswith(key + ".") for k in held)

    values = tuple(t for t, ov in parsed if _is_plain_value(ov) and not related(ov.key_or_group))
    return tuple(t for t, _ in parsed if t not in values), values


def value_items(overrides: Sequence[str]) -> list[tuple[str, Any]] | None:
    """(key, value) of each plain value override, as Hydra parses it (a fresh copy of the
    value); None when one is not a plain value override (:func:`split_value_overrides`)."""
    import copy

    parsed = [_parsed(text) for text in overrides]
    if not all(_is_plain_value(ov) for ov in parsed):
        return None
    return [(ov.key_or_group, copy.deepcopy(ov.value())) for ov in parsed]


def with_value_overrides(cfg: DictConfig, overrides: Sequence[str]) -> DictConfig | None:
    """A copy of the composed ``cfg`` with the plain value ``overrides``
    (:func:`split_value_overrides`) applied as Hydra's compose applies them (see the module
    docstring): equal to composing ``cfg``'s overrides followed by ``overrides``. None when one
    of them is not a plain value override or cannot be applied (a key the config does not
    have, a value its schema refuses): the caller composes, and Hydra reports the error in its
    own words."""
    import copy

    from omegaconf import OmegaConf
    from omegaconf.errors import OmegaConfBaseException

    items = value_items(overrides)
    if items is None:
        return None
    out = copy.deepcopy(cfg)
    try:
        for key, value in items:
            OmegaConf.update(out, key, value, merge=True)
    except (OmegaConfBaseException, ValueError, TypeError):
        return None
    return out
