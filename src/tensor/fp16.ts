/**
 * IEEE 754 half floats (FP16) to and from JavaScript numbers. Node.js 20 has neither Float16Array
 * nor Math.f16round, so FP16 tensors hold their raw bits in a Uint16Array and JSON values are
 * converted here.
 */

/** The number a half float's bits stand for. */
export function halfToNumber(bits: number): number {
  const sign = bits & 0x8000 ? -1 : 1;
  const exponent = (bits >> 10) & 0x1f;
  const mantissa = bits & 0x3ff;
  if (exponent === 0) return sign * mantissa * 2 ** -24;
  if (exponent === 0x1f) return mantissa ? NaN : sign * Infinity;
  return sign * (1 + mantissa / 1024) * 2 ** (exponent - 15);
}

/**
 * The half float nearest to `value` (ties to even, as IEEE rounding does), as its bits. Values
 * from 65520 up round to infinity; NaN becomes the quiet NaN 0x7e00.
 */
export function numberToHalf(value: number): number {
  if (Number.isNaN(value)) return 0x7e00;
  const sign = value < 0 || Object.is(value, -0) ? 0x8000 : 0;
  const magnitude = Math.abs(value);
  // The largest half is 65504; 65520 lies halfway to the next power of two and ties to even, up.
  if (magnitude >= 65520) return sign | 0x7c00;
  // Below the smallest normal (2^-14) a half counts units of 2^-24; 1024 units is that normal.
  if (magnitude < 2 ** -14) return sign | roundToEven(magnitude * 2 ** 24);
  let exponent = Math.floor(Math.log2(magnitude));
  // log2 can be off by one next to powers of two.
  if (2 ** exponent > magnitude) exponent--;
  else if (2 ** (exponent + 1) <= magnitude) exponent++;
  // Scaling by powers of two is exact, so the only rounding is this one.
  let mantissa = roundToEven((magnitude / 2 ** exponent - 1) * 1024);
  if (mantissa === 1024) {
    mantissa = 0;
    exponent++;
  }
  return sign | ((exponent + 15) << 10) | mantissa;
}

function roundToEven(x: number): number {
  const floor = Math.floor(x);
  const rest = x - floor;
  return rest > 0.5 || (rest === 0.5 && floor % 2 === 1) ? floor + 1 : floor;
}
