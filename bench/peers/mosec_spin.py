"""Mosec peer of the overload scenario: the compute-bound forward of spin_forward.py behind Mosec's
dynamic batching, one worker process.

    bench/.venv/bin/python bench/peers/mosec_spin.py --port 8000 --timeout 1000

A request is any JSON object ({"x": 1}); its answer {"ok": true}. Mosec has no priorities or
deadlines of a request: the class headers the load sends are ignored. BENCH_MAX_BATCH (16) and
BENCH_MAX_WAIT_MS (2) as Shoal's stage has them.
"""
import os
import sys

from mosec import Server, Worker

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from spin_forward import spin  # noqa: E402


class Spin(Worker):
    def forward(self, data: list) -> list:
        spin(len(data))
        return [{"ok": True}] * len(data)


if __name__ == "__main__":
    server = Server()
    server.append_worker(Spin, num=1, max_batch_size=int(os.environ.get("BENCH_MAX_BATCH", "16")), max_wait_time=int(os.environ.get("BENCH_MAX_WAIT_MS", "2")))
    server.run()
