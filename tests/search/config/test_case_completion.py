"""Case rows that leave columns out (search/config/cases.py ``complete_row``): the value each
gets, the same prediction as the row that writes it, and a note naming it."""

from __future__ import annotations

import csv

import pytest

from search.commands.validate import assumption_notes, main, predict
from search.config.cases import NEUTRAL_COLUMNS, complete_row

ROW = dict(case_id="full", gpu="h100_80g", gpus_per_node="8", num_gpus="32",
           scaleout_gbps_per_gpu="400", num_layers="16", hidden_size="2048", num_heads="16",
           num_kv_heads="16", ffn_hidden_size="8192", seq_len="2048", vocab_size="32000",
           global_batch="64", micro_batch="1", tp="2", pp="2", dp="8", vp="1", cp="1", ep="1",
           sequence_parallel="false", recompute="none", precision="bf16", zero_stage="0",
           dp_overlap="false", tp_comm_overlap="false")


def _time(row: dict[str, str]) -> str:
    out = predict(row)
    assert out["status"] == "ok", out["error"]
    return str(out["iter_time_s"])


def test_a_complete_row_is_left_as_it_is():
    assert complete_row(ROW) == (ROW, {})
    assert assumption_notes([ROW]) == []


@pytest.mark.parametrize("key", sorted(NEUTRAL_COLUMNS))
def test_an_empty_or_missing_optional_column_takes_its_neutral_value(key):
    empty = {**ROW, key: ""}
    missing = {k: v for k, v in ROW.items() if k != key}
    for row in (empty, missing):
        filled, assumed = complete_row(row)
        assert assumed == {key: NEUTRAL_COLUMNS[key]}
        assert filled[key] == NEUTRAL_COLUMNS[key] == ROW[key]  # ROW writes the neutral values
    assert _time(empty) == _time(missing) == _time(ROW)


def test_kv_heads_dp_and_a_one_node_scaleout_rate_are_derived():
    row = {**ROW, "num_kv_heads": "", "dp": ""}
    assert complete_row(row)[1] == {"num_kv_heads": 16, "dp": 8}
    assert _time(row) == _time(ROW)
    one_node = {**ROW, "num_gpus": "8", "dp": "2"}
    for rate in ("", "0", "0.0"):
        filled, assumed = complete_row({**one_node, "scaleout_gbps_per_gpu": rate})
        assert assumed == {"scaleout_gbps_per_gpu": 400.0}  # the DGX H100 preset: 50 GB/s
        assert _time(filled) == _time(one_node)


def test_what_cannot_be_derived_stays_an_error_naming_the_column():
    out = predict({**ROW, "dp": "", "num_gpus": "30"})  # 30 GPUs are not tp * pp * cp * dp
    assert out["status"] == "error" and out["error"].startswith("dp="), out["error"]
    out = predict({**ROW, "scaleout_gbps_per_gpu": ""})  # 4 nodes: the rate matters
    assert out["status"] == "error"
    assert out["error"].startswith("scaleout_gbps_per_gpu="), out["error"]
    out = predict({**ROW, "num_heads": "", "num_kv_heads": ""})
    assert out["status"] == "error" and out["error"].startswith("num_heads="), out["error"]


def test_integer_columns_written_as_floats_are_read_as_integers():
    # pandas writes an integer column with gaps as floats
    assert _time({**ROW, "num_gpus": "32.0", "micro_batch": "1.0"}) == _time(ROW)
    for bad in ("1.5", "nan", "inf", "-inf", "1e"):
        out = predict({**ROW, "micro_batch": bad})
        assert out["status"] == "error", bad
        assert out["error"].startswith(f"micro_batch={bad!r}: must be an integer"), out["error"]


def test_names_are_read_in_any_case():
    upper = {**ROW, "gpu": " H100_80G", "precision": "BF16", "recompute": "None"}
    assert complete_row(upper) == (ROW, {})
    assert _time(upper) == _time(ROW)


def test_validate_prints_one_note_per_completed_case(tmp_path, capsys):
    rows = [ROW, {**ROW, "case_id": "short", "vp": "", "num_kv_heads": ""}]
    cases = tmp_path / "cases.csv"
    with cases.open("w", newline="") as fh:
        writer = csv.DictWriter(fh, fieldnames=list(ROW))
        writer.writeheader()
        writer.writerows(rows)
    assert main(["--cases", str(cases), "--out", str(tmp_path / "pred.csv")]) == 0
    notes = [line for line in capsys.readouterr().out.splitlines() if line.startswith("note:")]
    assert notes == ["note: case 'short' leaves out vp, num_kv_heads: assumed vp=1, "
                     "num_kv_heads=16"]
    with (tmp_path / "pred.csv").open() as fh:
        preds = list(csv.DictReader(fh))
    assert [p["status"] for p in preds] == ["ok", "ok"]
    assert preds[0]["iter_time_s"] == preds[1]["iter_time_s"]


def test_an_mlp_not_4h_wide_is_gated_unless_the_row_says():
    """CASES.md has no ``mlp`` column: a Llama 3 8B-shaped row (ffn 14,336 = 3.5h, GQA) is a
    SwiGLU MLP of three matrices, predicted as the row that writes ``mlp=swiglu`` and slower
    than the same row read as a two-matrix GELU MLP; a 4h-wide MLP stays GELU."""
    llama = {**ROW, "hidden_size": "4096", "num_heads": "32", "num_kv_heads": "8",
             "ffn_hidden_size": "14336"}
    filled, assumed = complete_row(llama)
    assert assumed == {"mlp": "swiglu", "dropout": 0.0} and filled["mlp"] == "swiglu"
    assert any("mlp=swiglu" in n for n in assumption_notes([llama]))
    assert _time(llama) == _time({**llama, "mlp": "swiglu"})
    assert float(_time(llama)) > 1.1 * float(_time({**llama, "mlp": "gelu"}))
    assert complete_row({**llama, "mlp": "gelu"})[1] == {}  # what the row says stays
    assert complete_row(ROW)[1] == {}  # 8,192 = 4 x 2,048: GELU, nothing assumed


def test_a_gated_mlp_row_trains_without_dropout_unless_the_row_says():
    """CASES.md has no ``dropout`` column: a gated-MLP (LLaMA-family) row is read as trained
    without dropout, so backward keeps no masks (less memory, same time with a flash core); a
    GELU row keeps Megatron-LM's 0.1; a ``dropout`` column is read as given, and a bad one is
    an error naming it."""
    llama = {**ROW, "hidden_size": "4096", "num_heads": "32", "num_kv_heads": "8",
             "ffn_hidden_size": "14336", "mlp": "swiglu"}
    filled, assumed = complete_row(llama)
    assert assumed == {"dropout": 0.0} and filled["dropout"] == "0.0"
    assert any("dropout=0.0" in n for n in assumption_notes([llama]))
    without, with_dropout = predict(llama), predict({**llama, "dropout": "0.1"})
    assert without["status"] == with_dropout["status"] == "ok"
    assert float(without["peak_memory_gib"]) < float(with_dropout["peak_memory_gib"])
    assert without["iter_time_s"] == with_dropout["iter_time_s"]  # h100: flash core
    assert complete_row({**llama, "dropout": "0.1"})[1] == {}
    assert "dropout" not in complete_row(ROW)[0]  # GELU: the model's default, nothing assumed
    bad = predict({**llama, "dropout": "lots"})
    assert bad["status"] == "error" and "dropout" in bad["error"] and "lots" in bad["error"]
    assert "dropout" in predict({**llama, "dropout": "1.5"})["error"]


def test_a_spreadsheet_csv_reads_as_the_plain_file(tmp_path):
    """Excel's "CSV UTF-8" starts with a byte-order mark, and hand-written files put spaces
    after commas: the same predictions as the plain file (the mark cost every row its
    case_id, the spaces every column name)."""
    rows = [ROW, {**ROW, "case_id": "tp4", "tp": "4", "dp": "4"}]
    plain, sheet = tmp_path / "plain.csv", tmp_path / "sheet.csv"
    with plain.open("w", newline="") as fh:
        writer = csv.DictWriter(fh, fieldnames=list(ROW))
        writer.writeheader()
        writer.writerows(rows)
    lines = plain.read_text().splitlines()
    sheet.write_text("\ufeff" + "\r\n".join(", ".join(line.split(",")) for line in lines) + "\r\n",
                     encoding="utf-8")
    outs = []
    for path in (plain, sheet):
        out = tmp_path / f"{path.stem}_pred.csv"
        assert main(["--cases", str(path), "--out", str(out)]) == 0
        outs.append(out.read_text())
    assert outs[0] == outs[1] and outs[0].count(",ok,") == 2


def test_a_microbatch_group_column_runs_an_interleaved_count_pp_does_not_divide():
    """6 micro-batches per replica, interleaved (vp 2) on pp 4, which does not divide 6: the
    row needs Megatron-Core's micro-batch group (an optional column); without it the row is
    an error with the rule named (no memory verdict: nothing ran)."""
    row = {**ROW, "num_gpus": "32", "pp": "4", "dp": "4", "vp": "2", "global_batch": "24"}
    plain = predict(row)
    assert plain["status"] == "error" and "divisible by pp=4" in plain["error"]
    assert plain["fits_memory"] == ""
    grouped = predict({**row, "microbatch_group": "6"})
    assert grouped["status"] == "ok", grouped["error"]
    bad = predict({**row, "microbatch_group": "5"})  # a last group of 1 < pp
    assert bad["status"] == "error" and "microbatch_group" in bad["error"]
