/**
 * Finds the buffers that can move to another thread without a copy: ArrayBuffers, and typed
 * arrays that are the only view of their whole buffer. A view into a larger buffer is left to
 * structured clone, since moving the buffer would take its neighbours' bytes with it.
 */
export function transferablesOf(value: unknown, found: Set<ArrayBuffer> = new Set(), depth = 0): Set<ArrayBuffer> {
  if (value === null || typeof value !== "object" || depth > 4) return found;
  if (ArrayBuffer.isView(value)) {
    const { buffer } = value;
    if (buffer instanceof ArrayBuffer && value.byteOffset === 0 && value.byteLength === buffer.byteLength && buffer.byteLength > 0) {
      found.add(buffer);
    }
    return found;
  }
  if (value instanceof ArrayBuffer) {
    if (value.byteLength > 0) found.add(value);
    return found;
  }
  if (Array.isArray(value)) {
    // Arrays of numbers are cloned anyway; only look inside arrays that hold objects.
    if (value.length > 0 && typeof value[0] === "object") {
      for (let i = 0; i < value.length && i < 1024; i++) transferablesOf(value[i], found, depth + 1);
    }
    return found;
  }
  if (Object.getPrototypeOf(value) === Object.prototype) {
    for (const key in value) transferablesOf((value as Record<string, unknown>)[key], found, depth + 1);
  }
  return found;
}

/** The buffers of `list` that are still attached (a moved buffer has length 0). */
export function attached(list: Iterable<ArrayBuffer>): ArrayBuffer[] {
  const out: ArrayBuffer[] = [];
  for (const buffer of list) if (buffer.byteLength > 0 && !out.includes(buffer)) out.push(buffer);
  return out;
}

/**
 * Response bytes, made ready to move to the coordinator: a view into a larger buffer (a socket
 * chunk, an encoder's scratch space) is first copied to a buffer of its own, since cloning the
 * view would copy the whole buffer behind it. Throws for what is not bytes.
 */
export function exclusive(body: Uint8Array): Uint8Array {
  if (!(body instanceof Uint8Array)) throw new TypeError(`encode() must return a Uint8Array, not ${typeof body}`);
  if (body.byteOffset === 0 && body.byteLength === body.buffer.byteLength && body.buffer instanceof ArrayBuffer) return body;
  return Uint8Array.prototype.slice.call(body);
}
