"""Mosec peer of the model scenario: an ONNX model behind Mosec's dynamic batching.

    BENCH_MODEL=bench/.cache/mlp-big.onnx bench/.venv/bin/python bench/peers/mosec_model.py --port 8000

A request is {"input": [[...row...], ...]}; the rows of a batch's requests are stacked, run in one
onnxruntime call and cut back per request: {"output": [[...], ...]}. The batch settings and the
threads come from BENCH_NUM (2), BENCH_MAX_BATCH (32), BENCH_MAX_WAIT_MS (5) and
BENCH_INTRA_OP_THREADS (1), so that the harness gives every server the same.
"""
import os

import numpy as np
import onnxruntime as ort
from mosec import Server, ValidationError, Worker


def session(path: str) -> ort.InferenceSession:
    options = ort.SessionOptions()
    options.intra_op_num_threads = int(os.environ.get("BENCH_INTRA_OP_THREADS", "1"))
    options.inter_op_num_threads = 1
    options.execution_mode = ort.ExecutionMode.ORT_SEQUENTIAL
    options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
    return ort.InferenceSession(path, options, providers=["CPUExecutionProvider"])


class Inference(Worker):
    def __init__(self):
        super().__init__()
        self.session = session(os.environ["BENCH_MODEL"])
        self.input = self.session.get_inputs()[0].name
        width = self.session.get_inputs()[0].shape[1]
        self.example = [{"input": [[0.0] * width]}] * 8

    def forward(self, data: list) -> list:
        try:
            rows = [np.asarray(item["input"], dtype=np.float32) for item in data]
        except (KeyError, TypeError, ValueError) as err:
            raise ValidationError(f"bad input: {err}") from err
        out = self.session.run(None, {self.input: np.concatenate(rows)})[0]
        results, start = [], 0
        for r in rows:
            results.append({"output": out[start : start + len(r)].tolist()})
            start += len(r)
        return results


if __name__ == "__main__":
    server = Server()
    server.append_worker(
        Inference,
        num=int(os.environ.get("BENCH_NUM", "2")),
        max_batch_size=int(os.environ.get("BENCH_MAX_BATCH", "32")),
        max_wait_time=int(os.environ.get("BENCH_MAX_WAIT_MS", "5")),
    )
    server.run()
