"""MLServer custom runtime serving an ONNX model with onnxruntime (the model and multimodel scenarios).

The model file is `parameters.uri` of model-settings.json (relative to its folder), or BENCH_MODEL
when set (the harness's choice of model). One session per worker process with
BENCH_INTRA_OP_THREADS (default 1) intra-op threads. Adaptive batching (max_batch_size,
max_batch_time in model-settings.json) merges requests along the first axis before predict().
"""
import os

import onnxruntime as ort
from mlserver import MLModel
from mlserver.codecs import NumpyCodec
from mlserver.types import InferenceRequest, InferenceResponse
from mlserver.utils import get_model_uri


class OnnxModel(MLModel):
    async def load(self) -> bool:
        path = os.environ.get("BENCH_MODEL") or await get_model_uri(self.settings)
        options = ort.SessionOptions()
        options.intra_op_num_threads = int(os.environ.get("BENCH_INTRA_OP_THREADS", "1"))
        options.inter_op_num_threads = 1
        options.execution_mode = ort.ExecutionMode.ORT_SEQUENTIAL
        options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
        self.session = ort.InferenceSession(path, options, providers=["CPUExecutionProvider"])
        self.input = self.session.get_inputs()[0].name
        return True

    async def predict(self, payload: InferenceRequest) -> InferenceResponse:
        x = self.decode(payload.inputs[0], default_codec=NumpyCodec)
        out = self.session.run(None, {self.input: x})[0]
        return InferenceResponse(model_name=self.name, outputs=[NumpyCodec.encode_output("output", out)])
