"""Data-parallel training: one process per device, started by `torchrun` or `accelerate launch`.

    torchrun --nproc_per_node 2 -m wmsuite train-policy --data d.hdf5 --out runs/p   # gloo on CPU
    accelerate launch --num_processes 8 -m wmsuite train-wm ... --device cuda         # nccl on GPUs

Every process (rank) runs the whole command. The trainer hands each rank its slice of every global
batch (`TrainerConfig.batch_size` is the global batch) and DDP averages the gradients, so N processes
take the steps one process takes with the same global batch. Only rank 0 writes (run record,
metrics, checkpoints, exports); the others wait for it where they read what it wrote. Without a
launcher (WORLD_SIZE unset) every function here is a no-op on the one process.

The process group is the one HF accelerate's `PartialState` sets up from the launcher's variables
(RANK, WORLD_SIZE, MASTER_ADDR, ...), which the trainer's `Accelerator` shares.
"""

from __future__ import annotations

import atexit
import datetime
import json
import os
from collections.abc import Callable
from typing import Any, TypeVar

import torch

T = TypeVar("T")
LEAVE_TIMEOUT_S = 60.0
"""How long a finished rank waits at exit for the others before it leaves the group anyway."""


class RankFailedError(ValueError):
    """Rank 0 failed in a step every rank waits on; rank 0 reports the cause (the other ranks print
    this one line, as for any bad input)."""


def world_size() -> int:
    return int(os.environ.get("WORLD_SIZE", "1"))


def rank() -> int:
    return int(os.environ.get("RANK", "0"))


def is_main() -> bool:
    return rank() == 0


def init(device: str = "cpu") -> None:
    """Join the launcher's process group (gloo on CPU, nccl for CUDA); a no-op on one process or once joined."""
    if world_size() > 1 and not torch.distributed.is_initialized():
        from accelerate import PartialState

        PartialState(cpu=not str(device).startswith("cuda"))
        atexit.register(_leave)


def _leave() -> None:
    """Leave the process group before the interpreter exits: a gloo group torn down with the interpreter
    can abort a finished rank ("terminate called without an active exception"). On gloo every rank
    first waits for the others (a monitored barrier, so that no rank closes its sockets while another
    still talks to them); a rank that does not arrive in `LEAVE_TIMEOUT_S` (it failed, or is stuck
    in another collective) is reported by the barrier and the group is left anyway."""
    if not torch.distributed.is_initialized():
        return
    try:
        if torch.distributed.get_backend() == "gloo":
            torch.distributed.monitored_barrier(timeout=datetime.timedelta(seconds=LEAVE_TIMEOUT_S))
    except RuntimeError:
        pass  # the barrier named the missing rank on stderr; leaving is all that is left to do
    finally:
        torch.distributed.destroy_process_group()


def _device() -> torch.device:
    from accelerate import PartialState

    return PartialState().device


def barrier() -> None:
    """Every rank waits here until all have arrived (after rank 0 wrote what the others read)."""
    if world_size() > 1:
        init()
        torch.distributed.barrier()


def _broadcast_text(text: str) -> str:
    """Rank 0's `text` on every rank (sent as bytes, never pickled)."""
    device = _device()
    data = torch.tensor(list(text.encode()), dtype=torch.uint8, device=device) if is_main() else None
    size = torch.tensor([0 if data is None else data.numel()], dtype=torch.long, device=device)
    torch.distributed.broadcast(size, 0)
    if data is None:
        data = torch.empty(int(size.item()), dtype=torch.uint8, device=device)
    torch.distributed.broadcast(data, 0)
    return bytes(data.cpu().tolist()).decode()


def on_main(fn: Callable[..., T], *args: Any, **kwargs: Any) -> T:
    """`fn(*args, **kwargs)` run on rank 0 only, its JSON result handed to every rank. An exception
    on rank 0 is raised there as it is and as `RankFailedError` on the others, so none waits forever."""
    if world_size() == 1:
        return fn(*args, **kwargs)
    init()
    payload, error = None, None
    if is_main():
        try:
            payload = json.dumps({"ok": fn(*args, **kwargs)})
        except Exception as err:  # handed to the other ranks, then raised here too
            error, payload = err, json.dumps({"error": f"{type(err).__name__}: {err}"})
    reply = json.loads(_broadcast_text(payload or ""))
    if error is not None:
        raise error
    if "error" in reply:
        raise RankFailedError(f"rank 0 failed: {reply['error']}")
    return reply["ok"]


def any_rank(*flags: bool) -> list[bool]:
    """Each flag true on any rank (one all-reduce): decisions every rank must take together, such as
    stopping on a spent time budget or a non-finite loss."""
    if world_size() == 1:
        return [bool(f) for f in flags]
    t = torch.tensor([int(f) for f in flags], dtype=torch.int32, device=_device())
    torch.distributed.all_reduce(t, op=torch.distributed.ReduceOp.MAX)
    return [bool(v) for v in t.tolist()]


def mean_over_ranks(logs: dict[str, float]) -> dict[str, float]:
    """Each logged figure averaged over the ranks (every rank logs the same keys)."""
    if world_size() == 1 or not logs:
        return logs
    keys = sorted(logs)
    t = torch.tensor([float(logs[k]) for k in keys], dtype=torch.float64, device=_device())
    torch.distributed.all_reduce(t)
    return dict(zip(keys, (t / world_size()).tolist(), strict=True))


def shard(batch: Any, index: int, count: int) -> Any:
    """Slice `index` of `count` equal slices of a global batch: every tensor in the (nested dict /
    list / tuple) batch is cut along its first dimension, which must be the same batch size B for all
    and divisible by `count`; anything else (a generator, a step number) passes unchanged."""
    sizes = set()
    _sizes(batch, sizes)
    if len(sizes) > 1:
        raise ValueError(f"cannot split a batch across {count} processes: its tensors have different first "
                         f"dimensions {sorted(sizes)}; a source of such batches must shard them itself "
                         "(Trainer.fit(..., shard=False))")
    if sizes and next(iter(sizes)) % count:
        raise ValueError(f"the global batch of {next(iter(sizes))} does not split into {count} equal parts; "
                         f"choose a batch size divisible by the number of processes ({count})")
    return _cut(batch, index, count)


def _sizes(batch: Any, out: set[int]) -> None:
    if torch.is_tensor(batch):
        out.add(batch.shape[0] if batch.dim() else -1)
    elif isinstance(batch, dict):
        for v in batch.values():
            _sizes(v, out)
    elif isinstance(batch, (list, tuple)):
        for v in batch:
            _sizes(v, out)


def _cut(batch: Any, index: int, count: int) -> Any:
    if torch.is_tensor(batch):
        n = batch.shape[0] // count
        return batch[index * n:(index + 1) * n]
    if isinstance(batch, dict):
        return {k: _cut(v, index, count) for k, v in batch.items()}
    if isinstance(batch, list) and batch and isinstance(batch[0], str):  # per-sample strings (instructions)
        n = len(batch) // count
        return batch[index * n:(index + 1) * n]
    if isinstance(batch, (list, tuple)):
        return type(batch)(_cut(v, index, count) for v in batch)
    return batch
