"""MLServer peer of the overload scenario: the compute-bound forward of spin_forward.py as an
MLModel (`mlserver start bench/peers/mlserver_spin`), adaptive batching of up to 16 requests
within 2 ms, one worker process. A request is a V2 request with one FP32 input of shape [1, 1];
its answer one FP32 output `ok` of the same shape. MLServer has no priorities or deadlines of a
request: the class headers the load sends are ignored."""
import os
import sys

import numpy as np
from mlserver import MLModel
from mlserver.codecs import NumpyCodec
from mlserver.types import InferenceRequest, InferenceResponse

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
from spin_forward import spin  # noqa: E402


class Spin(MLModel):
    async def predict(self, payload: InferenceRequest) -> InferenceResponse:
        x = self.decode(payload.inputs[0], default_codec=NumpyCodec)
        spin(x.shape[0])
        return InferenceResponse(model_name=self.name, outputs=[NumpyCodec.encode_output("ok", np.ones((x.shape[0], 1), dtype=np.float32))])
