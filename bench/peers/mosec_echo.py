"""Mosec peer of the echo scenario: Mosec's own calculate-exp example, one stage, no batching.

    bench/.venv/bin/python bench/peers/mosec_echo.py --port 8000 --address 127.0.0.1 --log-level warning

BENCH_NUM sets the worker processes of the stage (default 1).
"""
import math
import os

from mosec import Server, ValidationError, Worker


class CalculateExp(Worker):
    def forward(self, data: dict) -> dict:
        try:
            x = float(data["x"])
        except KeyError as err:
            raise ValidationError(f"cannot find key {err}") from err
        except (TypeError, ValueError) as err:
            raise ValidationError("cannot convert 'x' value to float") from err
        return {"y": math.exp(x)}


if __name__ == "__main__":
    server = Server()
    server.append_worker(CalculateExp, num=int(os.environ.get("BENCH_NUM", "1")))
    server.run()
