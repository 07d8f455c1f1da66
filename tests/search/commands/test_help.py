"""Every ``simsweep`` command answers ``--help`` with its usage and an options list."""

from __future__ import annotations

import pytest

from search.cli import COMMANDS, main


@pytest.mark.parametrize("command", sorted(COMMANDS))
def test_help_lists_options(command, capsys):
    try:
        code = main([command, "--help"])
    except SystemExit as done:  # argparse commands exit after printing help
        code = done.code
    text = capsys.readouterr().out
    assert code == 0
    assert text.startswith("usage: simsweep") and "options:" in text and "--help" in text
    assert ":mod:" not in text
