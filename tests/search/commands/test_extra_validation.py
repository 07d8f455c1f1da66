"""Published runs outside shared/validation (tests/data/validation/extra_*.csv), read-only.

Only the Megatron-DeepSpeed stack's kernel_efficiency (conf/stack/deepspeed.yaml) is fitted on
the MT-NLG and BLOOM rows (validate --logo scores them with it refitted without their group);
nothing else is. The test checks what must hold whatever the level: every case
(including BLOOM-176B's uneven 70-layers-on-12-stages split) predicts with status ok, and the
ranking within a model is right: MT-NLG 530B gets faster from 2,240 to 2,800 to 3,360 GPUs
(measured 60.1 / 50.2 / 44.4 s) and, on 2,240 GPUs, sequence parallelism + selective recompute
beats full recompute (Korthikanti et al. 2022, MFU 54.2% vs 42.1%). No error bound is asserted.
"""

from __future__ import annotations

import csv
from pathlib import Path

import pytest

from search.commands.validate import predict

DATA = Path(__file__).resolve().parents[2] / "data" / "validation"


def _rows(name: str) -> list[dict[str, str]]:
    with (DATA / name).open(newline="") as fh:
        return list(csv.DictReader(fh))


@pytest.mark.slow  # six 530B/176B graphs: about a minute on 2 loaded cores
def test_every_extra_case_predicts_ok_and_ranks_right() -> None:
    cases = _rows("extra_cases.csv")
    measured = {r["case_id"]: float(r["iter_time_s"]) for r in _rows("extra_measured.csv")}
    assert {r["case_id"] for r in cases} == set(measured)
    assert any(int(r["num_layers"]) % int(r["pp"]) for r in cases)  # an uneven split is covered
    pred: dict[str, float] = {}
    for row in cases:
        out = predict(row)
        assert out["status"] == "ok", (out["case_id"], out["error"])
        pred[out["case_id"]] = float(out["iter_time_s"])
    mtnlg = sorted((c for c in pred if c.startswith("smith22_mtnlg530b_")),
                   key=lambda c: int(c.rsplit("_", 1)[1]))
    assert len(mtnlg) == 3
    assert [measured[c] for c in mtnlg] == sorted((measured[c] for c in mtnlg), reverse=True)
    assert [pred[c] for c in mtnlg] == sorted((pred[c] for c in mtnlg), reverse=True)
    full, sel = "korthikanti22_530b_2240_full", "korthikanti22_530b_2240_sp_selective"
    assert measured[full] > measured[sel] and pred[full] > pred[sel]
