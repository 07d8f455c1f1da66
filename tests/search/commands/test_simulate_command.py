"""`simsweep simulate`: Hydra composition, spec building, JSON output, one-line errors."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from search.cli import main
from search.config.build import build_specs
from search.config.compose import compose
from simcore.errors import InputError
from tests.cli_output import one_line_error


def test_every_workload_and_parallel_preset_builds() -> None:
    for workload in ["gpt_tiny", "gpt_1b", "gpt3_175b", "llama3_70b", "llama3_405b",
                     "mixtral_8x7b"]:
        for parallel in ["default", "megatron_tp8_pp8", "megatron_interleaved"]:
            cfg = compose([f"workload={workload}", f"parallel={parallel}"])
            model, par, system = build_specs(cfg)
            assert model.name == workload and par.tp >= 1 and system.num_gpus >= 1


def test_simulate_json(capsys: pytest.CaptureFixture[str]) -> None:
    rc = main(["simulate", "workload=gpt_tiny", "parallel.tp=2", "parallel.pp=2",
               "parallel.global_batch=16", "--json"])
    assert rc == 0
    out = json.loads(capsys.readouterr().out)
    assert out["feasible"] is True and out["iteration_time_s"] > 0
    assert 0 < out["mfu"] < 1


def test_bad_override_is_one_line_exit_2(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["simulate", "parallel.tpp=3"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "parallel.tpp" in err


def test_bad_value_names_key() -> None:
    with pytest.raises(InputError, match=r"parallel.recompute='sometimes'"):
        build_specs(compose(["parallel.recompute=sometimes"]))


def test_trace_file(tmp_path: pytest.TempPathFactory) -> None:
    path = tmp_path / "t.json"  # type: ignore[operator]
    rc = main(["simulate", "workload=gpt_tiny", "parallel.pp=2", "parallel.global_batch=16",
               f"--trace={path}"])
    assert rc == 0
    events = json.loads(path.read_text())["traceEvents"]
    names = {e["name"] for e in events if e["ph"] == "X"}
    assert {"pp_send", "optimizer_step"} <= names


@pytest.mark.parametrize(("overrides", "expected"), [
    (["parallel.pp=4"], None),  # 24 layers on 4 stages: even, no line
    (["parallel.pp=5"], "5 x 4, 4"),  # 24 on 5: the first four get one more
    (["parallel.pp=4", "parallel.layer_split=balanced"], "6 x 2, 7, 5"),  # output 1.79 layers
])
def test_simulate_prints_an_uneven_split(capsys: pytest.CaptureFixture[str],
                                         overrides: list[str], expected: str | None) -> None:
    """gpt_1b (24 layers, 51,200 words at h 2,048: its output layer is worth 1.79 layers)."""
    assert main(["simulate", "workload=gpt_1b", "system.num_gpus=40",
                 "parallel.global_batch=40", "tracking.enabled=false", *overrides]) == 0
    lines = [line for line in capsys.readouterr().out.splitlines()
             if line.startswith("  layers per stage")]
    assert lines == ([] if expected is None else [f"  layers per stage    {expected}"])


@pytest.mark.parametrize(("where", "needle"), [
    ("no/such/folder/t.json", "its folder {tmp}/no/such/folder does not exist"),
    ("", "is a folder; give the timeline's file name, e.g. {tmp}/timeline.json"),
])
def test_a_trace_path_that_cannot_be_written_is_refused_before_simulating(
        capsys: pytest.CaptureFixture[str], tmp_path: Path, where: str, needle: str) -> None:
    path = str(tmp_path / where) if where else str(tmp_path)
    rc = main(["simulate", "workload=gpt_tiny", f"--trace={path}"])
    out, err = capsys.readouterr()
    assert one_line_error(rc, err, f"--trace='{path}'", needle.format(tmp=tmp_path))
    assert out == ""


def test_a_trace_that_fails_to_write_keeps_the_printed_result(
        capsys: pytest.CaptureFixture[str]) -> None:
    """A file the check cannot foresee failing (a full disk: /dev/full): the breakdown is
    printed before, and the failure is one line naming --trace."""
    rc = main(["simulate", "workload=gpt_tiny", "parallel.pp=2", "parallel.global_batch=16",
               "--trace=/dev/full"])
    out, err = capsys.readouterr()
    assert one_line_error(rc, err, "--trace='/dev/full': cannot be written")
    assert "iteration time" in out and "status              fits" in out


def test_an_invalid_plan_prints_its_reason_once(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["simulate", "workload=gpt_tiny", "parallel.tp=3"]) == 0
    out = capsys.readouterr().out
    reason = "system.num_gpus=8: must be divisible by tp*pp*cp=3"
    assert out.count(reason) == 1 and f"status              INFEASIBLE: {reason}" in out
