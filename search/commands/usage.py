"""``--help`` text of the Hydra-style commands (``sweep``, ``search``, ``sync``, ``ui``): the
command's synopsis and description from its docstring, then its options, through argparse so
it reads like the argparse commands (``simulate``, ``astra``, ...); and the notes they share."""

from __future__ import annotations

import argparse
import re
from collections.abc import Sequence

__all__ = ["overlap_blocks_note", "print_help", "wants_help"]


def wants_help(argv: Sequence[str]) -> bool:
    """True when ``argv`` asks for help (``-h`` / ``--help`` anywhere)."""
    return any(a in ("-h", "--help") for a in argv)


def print_help(prog: str, doc: str, options: Sequence[tuple[str, str]]) -> int:
    """Print ``prog``'s help: the docstring (markup removed), then ``options`` (flag, text)."""
    text = re.sub(r":\w+:`([^`]*)`", r"\1", (doc or "").replace("``", ""))
    first, _, rest = text.strip().partition("\n")
    parser = argparse.ArgumentParser(prog=prog, description=rest.strip(), add_help=False,
                                     formatter_class=argparse.RawDescriptionHelpFormatter,
                                     usage=first.split(":", 1)[0].strip())
    group = parser.add_argument_group("options")
    group.add_argument("-h", "--help", action="store_true", help="show this help and exit")
    for flag, help_text in options:
        group.add_argument(flag, help=help_text, action="store_true")
    parser.print_help()
    return 0


def overlap_blocks_note(what: str, slower: str) -> str:
    """The note of a sweep or search whose ``what`` (plans with TP overlap, CP or chunked
    all-to-alls) are costed as pieces, ``slower`` than as closed-form blocks
    (``parallel.overlap_blocks``)."""
    return (f"note: {what} costed as pieces ({slower}); parallel.overlap_blocks=true costs "
            "them as closed-form blocks: the same iteration times to ~1e-12 (README, "
            "\"Where it stands\")")
