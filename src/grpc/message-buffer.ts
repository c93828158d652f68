/**
 * On a decoded message: the ArrayBuffer its bytes fields view, when the message had that buffer
 * to itself. @grpc/grpc-js gives each message of 4 KiB or more (inflated or not) an ArrayBuffer of
 * its own, maybe with its 5-byte frame prefix, and drops it once decoded; the message's raw
 * contents may then move to a worker as they are, their buffer with them.
 */
export const MESSAGE_BUFFER = Symbol("message buffer");

/** On a decoded inference message: the bytes it was decoded from (inflated, when it came compressed). */
export const MESSAGE_BYTES = Symbol("message bytes");
