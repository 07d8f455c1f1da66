"""The batch size of an imported execution trace is the model input's dim 0, not a parameter's.

Real ExecutionTraceObserver traces of a language model starting with an embedding (whose first
top-level op, ``aten::embedding(weight, indices)``, reads the [vocabulary, width] table first),
recorded in the test on the CPU: with an SGD step, an Adam step, and backward alone.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from simcore.traces.pytorch.api import import_execution_trace, read_step
from simcore.traces.pytorch.et_import import et_to_step, read_pytorch_et

VOCAB, WIDTH, BATCH, SEQ = 50, 16, 3, 7


@pytest.fixture(scope="module")
def recorded(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    torch = pytest.importorskip("torch")
    from torch.profiler import ExecutionTraceObserver

    folder = tmp_path_factory.mktemp("et")
    paths = {}
    for optimizer in ("sgd", "adam", "none"):
        torch.manual_seed(0)
        model = torch.nn.Sequential(torch.nn.Embedding(VOCAB, WIDTH), torch.nn.Linear(WIDTH, VOCAB))
        opt = (torch.optim.SGD(model.parameters(), lr=0.1) if optimizer == "sgd"
               else torch.optim.Adam(model.parameters()) if optimizer == "adam" else None)
        tokens = torch.randint(0, VOCAB, (BATCH, SEQ))
        labels = torch.randint(0, VOCAB, (BATCH, SEQ))

        def step(model: torch.nn.Module = model, opt: torch.optim.Optimizer | None = opt,
                 tokens: torch.Tensor = tokens, labels: torch.Tensor = labels) -> None:
            logits = model(tokens)
            torch.nn.functional.cross_entropy(logits.reshape(-1, VOCAB), labels.reshape(-1)).backward()
            if opt is not None:
                opt.step()
                opt.zero_grad()

        step()  # warm-up outside the trace
        path = folder / f"{optimizer}.json"
        obs = ExecutionTraceObserver()
        obs.register_callback(str(path))
        obs.start()
        step()
        obs.stop()
        obs.unregister_callback()
        paths[optimizer] = path
    return paths


@pytest.mark.parametrize("optimizer", ["sgd", "adam", "none"])
def test_batch_is_the_token_batch_not_the_embedding_table(recorded: dict[str, Path], optimizer: str) -> None:
    data = read_pytorch_et(recorded[optimizer])
    first = min((n for n in data["nodes"] if n["name"] == "aten::embedding"), key=lambda n: n["id"])
    assert first["inputs"]["shapes"][:2] == [[VOCAB, WIDTH], [BATCH, SEQ]]  # the table comes first
    assert et_to_step(data).batch_size == BATCH


def test_imported_step_file_carries_the_batch(recorded: dict[str, Path], tmp_path: Path) -> None:
    _, step_path = import_execution_trace(recorded["sgd"], tmp_path / "imp")
    assert read_step(step_path).batch_size == BATCH
