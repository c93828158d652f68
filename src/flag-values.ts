import { InvalidArgumentError } from "commander";

// How the text of each server flag is read (commander argument parsers): a bad value is an
// InvalidArgumentError, which commander reports with the flag's name.

/**
 * Where a request names its tenant (`--tenant-key`): a header (on gRPC, the call's metadata of
 * that name), its API key (the `Authorization: Bearer` token, or `x-api-key`), or a V2 parameter
 * (gRPC `parameters.NAME`; on HTTP, whose bodies this thread never decodes, the header of the same name).
 */
export type TenantKey = { readonly from: "header" | "parameter"; readonly name: string } | { readonly from: "api-key" };

/** Reads `--tenant-key`: `header:NAME`, `parameter:NAME` or `api-key`. */
export function parseTenantKey(text: string): TenantKey {
  if (text === "api-key") return { from: "api-key" };
  const match = /^(header|parameter):([A-Za-z0-9_.-]{1,64})$/.exec(text);
  if (match === null) throw new Error(`expected header:NAME, parameter:NAME or api-key, not '${text.slice(0, 80)}'`);
  return { from: match[1] as "header" | "parameter", name: match[1] === "header" ? match[2]!.toLowerCase() : match[2]! };
}

/** A commander argument parser for whole numbers from `min` to `max`. */
export function integer(min: number, max = Number.MAX_SAFE_INTEGER) {
  return (value: string): number => {
    const n = Number(value);
    if (!/^\s*\d+\s*$/.test(value) || !Number.isSafeInteger(n) || n < min || n > max) {
      throw new InvalidArgumentError(`expected a whole number from ${min} to ${max}`);
    }
    return n;
  };
}

// A comma-separated list of origins (`https://app.example.com`), or `*` for any.
export function originList(value: string): string[] {
  const origins = value.split(",").map((o) => o.trim()).filter((o) => o.length > 0);
  for (const origin of origins) {
    if (origin !== "*" && !/^https?:\/\/[^/\s]+$/.test(origin)) throw new InvalidArgumentError(`'${origin}' is not an origin such as https://app.example.com, or *`);
  }
  return origins;
}

// A share from 0 to 1, such as 0.1.
export function fraction(value: string): number {
  const n = Number(value);
  if (value.trim() === "" || !Number.isFinite(n) || n < 0 || n > 1) throw new InvalidArgumentError("expected a number from 0 to 1");
  return n;
}

// A model name, as model-settings.json allows it.
export function modelName(value: string): string {
  if (!/^[A-Za-z0-9_.-]+$/.test(value)) throw new InvalidArgumentError("expected letters, digits, '_', '.' and '-' only");
  return value;
}

export function tenantKey(value: string): TenantKey {
  try {
    return parseTenantKey(value);
  } catch (err) {
    throw new InvalidArgumentError((err as Error).message);
  }
}

// Bucket bounds: positive numbers, comma-separated, rising.
export function bucketList(value: string): number[] {
  const bounds = value.split(",").map((b) => Number(b.trim()));
  if (bounds.some((b, i) => !Number.isFinite(b) || b <= 0 || (i > 0 && b <= bounds[i - 1]!))) throw new InvalidArgumentError("expected positive numbers, comma-separated and rising, such as 0.01,0.1,1");
  return bounds;
}

export function metricPrefix(value: string): string {
  if (!/^[a-zA-Z_][a-zA-Z0-9_]*$/.test(value)) throw new InvalidArgumentError("expected letters, digits and underscores, not starting with a digit");
  return value;
}
