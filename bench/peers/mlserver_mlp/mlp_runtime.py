"""The python scenario's MLServer runtime: the NumPy MLP of bench/peers/numpy_mlp.py as an MLModel,
served as it is by MLServer 1.7 (`mlserver start bench/peers/mlserver_mlp`) and by Shoal
(`shoal serve --model-repository bench/peers/mlserver_mlp`). Adaptive batching (max_batch_size,
max_batch_time) merges requests along the first axis before predict(). A request is a V2 request
with one FP32 input of shape [1, 1024]; its answer one FP32 output `output` of shape [1, 1000]."""
import os
import sys

import numpy as np
from mlserver import MLModel
from mlserver.codecs import NumpyCodec
from mlserver.types import InferenceRequest, InferenceResponse

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
from numpy_mlp import forward, weights  # noqa: E402


class NumpyMlp(MLModel):
    async def load(self) -> bool:
        self.layers = weights()
        return True

    async def predict(self, payload: InferenceRequest) -> InferenceResponse:
        x = self.decode(payload.inputs[0], default_codec=NumpyCodec).astype(np.float32, copy=False)
        return InferenceResponse(model_name=self.name, outputs=[NumpyCodec.encode_output("output", forward(self.layers, x))])
