/**
 * Tensor elements as raw bytes: little-endian, row-major, without padding (a bool is one byte, 0
 * or 1), as MessagePack `bin` and the V2 binary data extension carry them.
 */
import type { TypedArray, TypedArrayClass } from "./datatypes.js";

// Elements are read and written through typed-array views, which use the host's byte order.
// Every platform onnxruntime-node ships for is little-endian.
if (new Uint8Array(new Uint16Array([1]).buffer)[0] !== 1) throw new Error("shoal's tensors need a little-endian host");

/** The bytes of a typed array's elements: a view, no copy. */
export function bytesOf(data: TypedArray): Uint8Array {
  return new Uint8Array(data.buffer, data.byteOffset, data.byteLength);
}

/**
 * `bytes` as elements of `array`, whose size they must be a multiple of. A copy of their own; or,
 * with `view`, a view onto them when they sit at an offset the element type can be read at (it
 * keeps their whole buffer alive, and dies with it if the buffer is transferred).
 */
export function fromBytes(array: TypedArrayClass, bytes: Uint8Array, view = false): TypedArray {
  const size = array.BYTES_PER_ELEMENT;
  if (view && bytes.byteOffset % size === 0) return new array(bytes.buffer as ArrayBuffer, bytes.byteOffset, bytes.byteLength / size);
  // Uint8Array's slice copies even when `bytes` is a Buffer, whose own slice() is a view.
  return new array(Uint8Array.prototype.slice.call(bytes).buffer);
}
