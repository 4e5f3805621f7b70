"""Under torch.distributed (2 CPU processes, gloo, DDP): each rank watches its own batches
and the rank that sees the fault writes fault.json with its rank."""

from __future__ import annotations

import datetime
import json
import socket
from pathlib import Path

import pytest
import torch
import torch.distributed as dist
import torch.multiprocessing as mp
from torch.nn.parallel import DistributedDataParallel
from torch.utils.data import DataLoader

import preflight
from preflight.report.model import SmokeResult
from tests.watch import tiny

pytestmark = pytest.mark.skipif(not dist.is_available() or not dist.is_gloo_available(),
                                reason="torch.distributed with gloo is not available")


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _worker(rank: int, port: int, out: str) -> None:
    dist.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{port}", rank=rank,
                            world_size=2, timeout=datetime.timedelta(seconds=30))
    try:
        torch.manual_seed(0)
        model = DistributedDataParallel(tiny.Net())
        opt = torch.optim.AdamW(model.parameters(), lr=1e-2)
        rows = tiny.make_rows(nan_row=45)  # rank 1 gets rows 32..63: its second batch
        data = preflight.watch.with_ids(rows[rank * 32:(rank + 1) * 32])
        loader = DataLoader(data, batch_size=8, collate_fn=data.collate(tiny.collate))
        steps, faulted = 0, False
        with preflight.watch(model, opt, step_fn=tiny.step_fn, out=out) as w:
            for batch in loader:
                loss = tiny.step_fn(model, batch)
                try:
                    w.step(loss, batch)
                except preflight.watch.TrainingFault:
                    faulted = True
                # The ranks agree before the gradient all-reduce, so none waits for a
                # rank that stopped.
                flag = torch.tensor([float(faulted)])
                dist.all_reduce(flag)
                if flag.item():
                    break
                loss.backward()
                opt.step()
                opt.zero_grad()
                steps += 1
        Path(out, f"rank{rank}.json").write_text(json.dumps({"faulted": faulted,
                                                             "steps": steps}))
        # Both ranks done before either tears the group down: a rank that destroyed it while
        # the other still closed its side aborted once in CI ("terminate called without an
        # active exception", gloo, a loaded 2-core machine).
        dist.barrier()
    finally:
        dist.destroy_process_group()


def test_the_rank_that_sees_the_nan_row_writes_fault_json_with_its_rank(tmp_path: Path) -> None:
    out = tmp_path / "watch"
    mp.start_processes(_worker, args=(_free_port(), str(out)), nprocs=2, join=True,
                       start_method="spawn")
    ranks = {r: json.loads((out / f"rank{r}.json").read_text()) for r in (0, 1)}
    assert ranks[1] == {"faulted": True, "steps": 1}
    assert ranks[0] == {"faulted": False, "steps": 1}  # it stopped with rank 1
    fault = SmokeResult.model_validate_json((out / "fault.json").read_text())
    assert fault.rank == 1 and fault.step == 1 and fault.verdict == "data_fault"
    assert fault.minimal_ids == ["r45"] and fault.first_bad_module == "body.0"
    assert not list(out.glob("fault-rank*.json"))
