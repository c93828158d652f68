/**
 * What one request may make a worker allocate. The server's flags set them; every worker gets
 * them at boot, and tensor readers take each request's elements from them before making arrays.
 */

/** What one request may make a worker allocate: `--max-tensor-elements`, `--max-bytes-elements`. */
export interface RequestLimits {
  /** Most tensor elements of one request, all inputs together. */
  maxTensorElements: number;
  /** Most BYTES (string) elements of one request. */
  maxBytesElements: number;
}

/** No limits: for tensors that do not come from a client (a model's outputs, a client's own reading). */
export const UNLIMITED: RequestLimits = Object.freeze({ maxTensorElements: Infinity, maxBytesElements: Infinity });
