"""``simsweep validate`` on files a user writes: what it refuses before simulating anything,
and how a bad row or cell is reported.

- the cases and measured files are read and checked first: a file that is missing, not UTF-8,
  not of the schema (no ``case_id`` / ``gpu`` column: another file, or semicolons), or that
  repeats a ``case_id`` (CASES.md: unique; the report joins on it) stops the command with one
  line naming the file, the value and the rule, before any case is simulated;
- an explicit ``--measured`` applies to every cases file; a missing one is an error, not an
  empty report;
- a plan that breaks a rule of the model or the cluster is ``status=error`` with no memory
  verdict (``fits_memory`` empty); ``infeasible`` is kept for a plan that runs out of memory;
- a bad cell names its column.
"""

from __future__ import annotations

import csv
from pathlib import Path

import pytest

from search.cli import main as cli
from search.commands.validate import _reference_fraction, main, predict
from search.config.cases import cluster_for, complete_row
from simcore.errors import InputError
from tests.search.config.test_case_completion import ROW as COMPLETE_ROW

ROW = {**COMPLETE_ROW, "case_id": "a"}  # an H100 run of 32 GPUs, every column given


def _write(path: Path, rows: list[dict[str, str]]) -> Path:
    with path.open("w", newline="") as fh:
        writer = csv.DictWriter(fh, fieldnames=list(rows[0]))
        writer.writeheader()
        writer.writerows(rows)
    return path


def _refused(argv: list[str], capsys: pytest.CaptureFixture[str]) -> str:
    """Run the command as the console does; return its one-line error (exit 2)."""
    assert cli(["validate", *argv]) == 2
    err = capsys.readouterr().err.strip()
    assert "Traceback" not in err and len(err.splitlines()) == 1, err
    return err


def test_a_repeated_case_id_is_refused_before_any_case_runs(tmp_path, capsys):
    out = tmp_path / "pred.csv"
    one = _write(tmp_path / "one_cases.csv", [ROW, {**ROW, "tp": "4", "dp": "4"}])
    err = _refused(["--cases", str(one), "--out", str(out)], capsys)
    assert "'a'" in err and "case_id must be unique" in err and "one_cases.csv" in err
    assert not out.exists()
    # across two files too
    two = _write(tmp_path / "two_cases.csv", [{**ROW, "case_id": "b"}])
    three = _write(tmp_path / "three_cases.csv", [{**ROW, "case_id": "b", "tp": "4", "dp": "4"}])
    err = _refused(["--cases", str(two), str(three), "--out", str(out)], capsys)
    assert "two_cases.csv:'b'" in err and "three_cases.csv:'b'" in err


def test_files_not_of_the_schema_are_refused_naming_the_file(tmp_path, capsys):
    out = tmp_path / "pred.csv"
    bad = {"empty": "", "junk header": "foo,bar\n1,2\n",
           "semicolons": ";".join(ROW) + "\n" + ";".join(ROW.values()) + "\n"}
    for text in bad.values():
        path = tmp_path / "x_cases.csv"
        path.write_text(text)
        err = _refused(["--cases", str(path), "--out", str(out)], capsys)
        assert err.startswith("simsweep validate: --cases=") or "--cases=" in err, err
        assert "x_cases.csv" in err and "lacks case_id" in err, err
    latin = tmp_path / "latin_cases.csv"
    latin.write_bytes(",".join(ROW).encode() + b"\n" + "caf\xe9".encode("latin-1") + b",\n")
    assert "not UTF-8 text" in _refused(["--cases", str(latin), "--out", str(out)], capsys)
    missing = tmp_path / "nosuch_cases.csv"
    assert "no such file" in _refused(["--cases", str(missing), "--out", str(out)], capsys)
    assert not out.exists()


def test_blank_rows_are_skipped(tmp_path):
    path = tmp_path / "b_cases.csv"
    _write(path, [ROW])
    path.write_text(path.read_text() + ",,,,,\n   \n")
    out = tmp_path / "pred.csv"
    assert main(["--cases", str(path), "--out", str(out)]) == 0
    rows = list(csv.DictReader(out.open()))
    assert [r["case_id"] for r in rows] == ["a"] and rows[0]["status"] == "ok"


def test_an_explicit_measured_file_must_exist_and_applies_to_every_cases_file(tmp_path, capsys):
    one = _write(tmp_path / "one_cases.csv", [ROW])
    two = _write(tmp_path / "two_cases.csv", [{**ROW, "case_id": "b", "tp": "4", "dp": "4"}])
    out = tmp_path / "pred.csv"
    err = _refused(["--cases", str(one), "--out", str(out), "--measured",
                    str(tmp_path / "gone.csv")], capsys)
    assert "--measured=" in err and "gone.csv" in err and "no such file" in err
    measured = tmp_path / "times.csv"
    measured.write_text("case_id,iter_time_s\na,1.0\nb,2.0\n")
    assert cli(["validate", "--cases", str(one), str(two), "--out", str(out),
                "--measured", str(measured)]) == 0
    report = capsys.readouterr().out
    assert "over 2 cases" in report, report


def test_a_bad_measured_file_names_the_file_the_case_and_the_column(tmp_path, capsys):
    cases = _write(tmp_path / "c_cases.csv", [ROW])
    out = tmp_path / "pred.csv"
    (tmp_path / "c_measured.csv").write_text("case_id,iter_time_s\na,abc\n")
    err = _refused(["--cases", str(cases), "--out", str(out)], capsys)
    assert "iter_time_s of c_measured.csv:'a'='abc'" in err and "positive number" in err
    (tmp_path / "c_measured.csv").write_text("id,iter_time_s\na,1.0\n")
    err = _refused(["--cases", str(cases), "--out", str(out)], capsys)
    assert "c_measured.csv" in err and "lacks case_id" in err
    (tmp_path / "c_measured.csv").write_text("case_id,iter_time_s\na,-1\n")
    assert "positive number" in _refused(["--cases", str(cases), "--out", str(out)], capsys)


def test_a_plan_breaking_a_rule_is_an_error_with_no_memory_verdict():
    broken = predict({**ROW, "num_gpus": "16"})  # tp*pp*dp*cp = 32
    assert broken["status"] == "error" and broken["fits_memory"] == ""
    assert "num_gpus" in broken["error"] and broken["iter_time_s"] == ""
    oom = predict({**ROW, "num_layers": "256", "hidden_size": "8192", "num_heads": "64",
                   "num_kv_heads": "64", "ffn_hidden_size": "32768", "micro_batch": "8",
                   "global_batch": "64"})
    assert oom["status"] == "infeasible" and oom["fits_memory"] == "false"
    assert oom["error"].startswith("out of memory") and float(oom["iter_time_s"]) > 0


def test_bad_cells_name_their_column():
    out = predict({**ROW, "scaleout_gbps_per_gpu": "fast"})
    assert out["error"].startswith("scaleout_gbps_per_gpu='fast': must be a number"), out
    for bad in ("abc", "8.5"):
        out = predict({**ROW, "num_kv_heads": bad, "gpu": "a100_80g"})
        assert out["error"].startswith(f"num_kv_heads={bad!r}: must be an integer"), out
    # "8.0" is 8 here as in every other integer column (pandas writes gappy integers so)
    assert predict({**ROW, "num_kv_heads": "8.0"}) == predict({**ROW, "num_kv_heads": "8"})
    out = predict({**ROW, "dp": "", "pp": "3"})
    assert out["error"].startswith("dp='': empty, and num_gpus=32 is not a positive multiple "
                                   "of tp*pp*cp=6"), out


def test_an_empty_ffn_width_is_four_times_the_hidden_size():
    row = {**ROW, "ffn_hidden_size": ""}
    filled, assumed = complete_row(row)
    assert assumed == {"ffn_hidden_size": 8192}
    assert predict(row)["iter_time_s"] == predict(ROW)["iter_time_s"] != ""


def test_the_logo_fallback_skips_cases_without_a_cluster_preset():
    with pytest.raises(InputError):
        cluster_for("tpu_v5")
    want = cluster_for("h100_80g")["calibration"]["sustained_compute_fraction"]
    assert _reference_fraction([{"gpu": "tpu_v5"}, {"gpu": "H100_80G"}]) == want
    assert _reference_fraction([{"gpu": "tpu_v5"}]) == 1.0


def test_logo_without_two_predicted_cases_says_so(tmp_path, capsys):
    cases = _write(tmp_path / "l_cases.csv", [{**ROW, "gpu": "tpu_v5"}, {**ROW, "case_id": "b"}])
    (tmp_path / "l_measured.csv").write_text("case_id,iter_time_s\na,1.0\nb,2.0\n")
    assert main(["--cases", str(cases), "--out", str(tmp_path / "p.csv"), "--logo"]) == 0
    captured = capsys.readouterr()
    assert "no leave-one-group-out report" in captured.out and "1 of 2 are" in captured.out
    assert "RuntimeWarning" not in captured.err
