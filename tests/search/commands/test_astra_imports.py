"""``simsweep astra`` is a short-lived process: it imports the emulator, nothing of the orchestrator."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[3]
DATA = REPO / "tests" / "data"
HEAVY = ("polars", "mlflow", "ray", "optuna", "hydra", "omegaconf", "scipy", "simcore.engine.schedule",
         "simcore.traces.chakra.export", "simcore.traces.msccl")


def test_astra_command_imports_no_orchestration_library(tmp_path: Path) -> None:
    for r in range(8):  # the reference's one-node all-reduce (§4.2) on 8 NPUs
        shutil.copy(DATA / "chakra" / "v0.0.4_all_reduce.3.et", tmp_path / f"w.{r}.et")
    argv = ["astra", "--workload", str(tmp_path / "w"), "--system", str(DATA / "astra" / "Ring_4chunks.json"),
            "--network", str(DATA / "astra" / "Switch_8.yml")]
    program = (
        "import sys\n"
        "from search.cli import main\n"
        f"code = main({argv!r})\n"
        f"heavy = {HEAVY!r}\n"
        "print('loaded', sorted(m for m in sys.modules if m in heavy or m.split('.')[0] in heavy), code)\n"
    )
    env = dict(os.environ, PYTHONPATH=str(REPO), SIMSWEEP_CACHE_DIR="off")
    out = subprocess.run([sys.executable, "-c", program], cwd=REPO, capture_output=True, text=True, env=env)
    assert out.returncode == 0, out.stderr
    lines = out.stdout.strip().splitlines()
    assert len([line for line in lines if line.startswith("sys[")]) == 8  # it ran
    assert lines[-1] == "loaded [] 0"
