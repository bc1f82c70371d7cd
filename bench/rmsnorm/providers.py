"""Timing providers side by side: a Provider runs one thing on input set i; batches of launches
(or CUDA-graph replays of them) timed with CUDA events, round-robin across providers per sample
so that clock and thermal drift fall on all of them alike. torch is imported inside functions."""

from __future__ import annotations

import math
from typing import Any, Callable, Dict, List, Sequence

from bench_stats import launches_per_batch, round_robin_order


class Provider:
    """Something timed: `step(i, stream)` runs it once on input set i on the given stream."""

    def __init__(self, name: str, step: Callable[[int, int], Any], nsets: int) -> None:
        self.name, self.step, self.nsets = name, step, nsets
        self.next = 0
        self.per_batch = 1
        self.graph = None
        # The stream to warm up and capture on (None: a fresh side stream and torch's default
        # capture stream). autograd runs backward ops on their forward's stream, so its provider
        # captures on the stream its forward ran on.
        self.capture_stream = None
        # hold: keep each input set's last result alive, so every set writes its own outputs (as a
        # candidate's preallocated ones) instead of the allocator handing one freed block to all.
        self.hold = False
        self.held: List[Any] = [None] * nsets

    def run(self, n: int) -> None:
        import torch
        stream = torch.cuda.current_stream().cuda_stream
        for _ in range(n):
            i = self.next % self.nsets
            r = self.step(i, stream)
            if self.hold:
                self.held[i] = None  # freed first, so the new result may take the set's old block
                self.held[i] = r
            self.next += 1

    def batch(self) -> None:
        if self.graph is not None:
            self.graph.replay()
        else:
            self.run(self.per_batch)


def event_ms(fn: Callable[[], Any]) -> float:
    import torch
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    start.record()
    fn()
    end.record()
    end.synchronize()
    return start.elapsed_time(end)


def calibrate(p: Provider, target_ms: float) -> None:
    import torch
    p.run(1)
    torch.cuda.synchronize()
    p.per_batch = launches_per_batch(event_ms(lambda: p.run(1)), target_ms)


def capture(p: Provider) -> None:
    """A CUDA graph of one batch (a whole number of passes over the pool), so replays time the
    device work without host launch gaps."""
    import torch
    p.per_batch = math.ceil(p.per_batch / p.nsets) * p.nsets
    p.next = 0
    side = p.capture_stream if p.capture_stream is not None else torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):  # warm-up off the capture, as torch's docs ask
        p.run(p.nsets)
    torch.cuda.current_stream().wait_stream(side)
    g = torch.cuda.CUDAGraph()
    with torch.cuda.graph(g, stream=p.capture_stream):
        p.run(p.per_batch)
    p.graph = g


def time_round_robin(providers: Sequence[Provider], samples: int, warmup: int) -> Dict[str, List[float]]:
    import torch
    for _ in range(warmup):
        for p in providers:
            p.batch()
    torch.cuda.synchronize()
    by_name = {p.name: p for p in providers}
    times: Dict[str, List[float]] = {p.name: [] for p in providers}
    for s in range(samples):
        for name in round_robin_order(list(by_name), s):
            p = by_name[name]
            times[name].append(event_ms(p.batch) / p.per_batch)
    return times
