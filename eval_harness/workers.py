"""Records produced in a worker process while this one computes something else.

    worker = RecordWorker(produce, (setup, jobs), what="the real-simulator worker")
    ...                                   # this process's own work, calling worker.drain(sink) now and then
    worker.finish(sink)                   # every record `produce(setup, jobs)` yielded went to sink(record)

`produce` is a module-level generator function; it and its arguments are pickled into a *spawned*
process (a fork of a process whose OpenMP threads have run can hang in the child's first parallel
region, and torch runs OpenMP). The worker sends each record back through a queue, then a "done"
or an "error" with the traceback, which `drain` raises here; it exits when its parent is gone.
`evaluate.py` runs the real simulator's waves this way beside the learned simulator's.
"""

from __future__ import annotations

import contextlib
import os
import pickle
import queue
from collections.abc import Callable, Iterator
from typing import Any


@contextlib.contextmanager
def torch_threads(n: int | None) -> Iterator[None]:
    """Within the block torch computes with `n` threads (None: as it is)."""
    import torch

    before = torch.get_num_threads()
    if n is not None:
        torch.set_num_threads(n)
    try:
        yield
    finally:
        torch.set_num_threads(before)


def usable_cores() -> int:
    """CPU cores this process may run on."""
    return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1


class RecordWorker:
    """See the module docstring. `what` names the worker in errors."""

    def __init__(self, produce: Callable[..., Iterator[Any]], args: tuple, what: str = "the worker") -> None:
        import multiprocessing as mp

        ctx = mp.get_context("spawn")
        self.queue, self.what, self.done = ctx.Queue(), what, False
        self.process = ctx.Process(target=_serve, args=(produce, args, os.getpid(), self.queue), daemon=True)
        try:
            self.process.start()
        except (AttributeError, TypeError, pickle.PicklingError) as err:
            raise ValueError(f"{what} runs in another process, and what it is given does not pickle ({err}); "
                             "use module-level functions or objects") from err

    def drain(self, sink: Callable[[Any], None], block: bool = False) -> None:
        """Hand every record that has arrived to `sink` (with `block`, wait until the worker is done)."""
        while not self.done:
            try:
                kind, payload = self.queue.get(timeout=5.0) if block else self.queue.get_nowait()
            except queue.Empty:
                if not block:
                    return
                if not self.process.is_alive():
                    raise RuntimeError(f"{self.what} died (exit code {self.process.exitcode}) without reporting "
                                       "why") from None
                continue
            if kind == "error":
                raise RuntimeError(f"{self.what} failed: {payload}")
            if kind == "done":
                self.done = True
            else:
                sink(payload)

    def finish(self, sink: Callable[[Any], None]) -> None:
        self.drain(sink, block=True)
        self.process.join()

    def stop(self) -> None:
        if self.process.is_alive():
            self.process.terminate()
        self.process.join()


def _serve(produce: Callable[..., Iterator[Any]], args: tuple, parent: int, out: Any) -> None:
    """The worker process: every record of `produce(*args)` onto `out`, then ("done", None), or
    ("error", text) on any failure; gone without a word when the parent is."""
    try:
        for record in produce(*args):
            if os.getppid() != parent:
                os._exit(0)
            out.put(("record", record))
        out.put(("done", None))
    except BaseException as err:  # noqa: BLE001  (reported to the parent, which raises it)
        import traceback

        out.put(("error", f"{type(err).__name__}: {err}\n{traceback.format_exc()}"))
