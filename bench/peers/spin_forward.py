"""The overload scenario's compute-bound forward for its Python peers: NumPy matrix products for
BENCH_FIXED_MS plus BENCH_ITEM_MS per item of the batch (10 + 2 by default), by the wall clock, as
bench/servers/overload-server.ts spins Shoal's Worker, so that every server has the same model."""
import os
import time

import numpy as np

FIXED_MS = float(os.environ.get("BENCH_FIXED_MS", "10"))
ITEM_MS = float(os.environ.get("BENCH_ITEM_MS", "2"))
_A = np.random.default_rng(0).standard_normal((64, 64), dtype=np.float32)


def spin(items: int) -> None:
    """Keeps the CPU busy with matrix products for the batch's time."""
    end = time.perf_counter() + (FIXED_MS + ITEM_MS * items) / 1000
    x = _A
    while time.perf_counter() < end:
        x = np.tanh(x @ _A)
