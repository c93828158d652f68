/**
 * V2 requests and responses as the gRPC service's messages, both ways: inputs go as
 * `raw_input_contents` (a view of each typed array's bytes, copied once into the message by
 * protobuf), outputs come from `raw_output_contents` (views where they are aligned) or from typed
 * contents, as servers that answer so (MLServer) send them.
 */
import { ShoalError } from "../../errors.js";
import { contentsBytes, hasContents, parameterMessages, parameters, type InferRequestFields, type InferResponseMessage } from "../../grpc/messages.js";
import { isV2Datatype } from "../../tensor/datatypes.js";
import { readBinaryData, writeBinaryData } from "../../v2/binary.js";
import type { V2InferenceRequest, V2InferenceResponse, V2Tensor } from "../../v2/types.js";
import { ProtocolError } from "../errors.js";

/** The ModelInferRequest of a V2 request to `model` (`version` "" for the server's choice). */
export function inferRequestMessage(model: string, version: string, request: V2InferenceRequest): InferRequestFields {
  return {
    model_name: model,
    model_version: version,
    id: request.id ?? "",
    parameters: parameterMessages(request.parameters ?? {}),
    inputs: request.inputs.map((input) => ({ name: input.name, datatype: input.datatype, shape: input.shape, parameters: parameterMessages(input.parameters ?? {}) })),
    outputs: (request.outputs ?? []).map((output) => ({ name: output.name, parameters: parameterMessages(output.parameters ?? {}) })),
    raw_input_contents: request.inputs.map((input) => writeBinaryData(input.data)),
  };
}

/** The V2 response of a ModelInferResponse; throws a {@link ProtocolError} for one that does not fit its outputs. */
export function inferResponse(message: InferResponseMessage): V2InferenceResponse {
  const raw = message.raw_output_contents;
  if (raw.length > 0 && raw.length !== message.outputs.length) throw new ProtocolError(`the response has ${raw.length} raw_output_contents for ${message.outputs.length} outputs`);
  try {
    const outputs = message.outputs.map((output, i): V2Tensor => {
      const where = `output '${output.name}'`;
      if (!isV2Datatype(output.datatype)) throw new ProtocolError(`${where} has the unknown datatype ${JSON.stringify(output.datatype)}`);
      const shape = output.shape.map(Number);
      const bytes = raw.length > 0 && !hasContents(output) ? raw[i]! : contentsBytes({ ...output, shape }, where, "raw_output_contents");
      const own = parameters(output.parameters);
      return { name: output.name, datatype: output.datatype, shape, data: readBinaryData(where, output.datatype, shape, bytes), ...(Object.keys(own).length === 0 ? {} : { parameters: own }) };
    });
    const own = parameters(message.parameters);
    return {
      model_name: message.model_name,
      ...(message.model_version === "" ? {} : { model_version: message.model_version }),
      ...(message.id === "" ? {} : { id: message.id }),
      ...(Object.keys(own).length === 0 ? {} : { parameters: own }),
      outputs,
    };
  } catch (err) {
    if (err instanceof ShoalError) throw new ProtocolError(err.message);
    throw err;
  }
}
