/**
 * Schemas of a Worker's items: zod schemas that workers check and turn into JSON Schema. This
 * module runs inside workers only; the coordinator sees the JSON Schemas a worker reports.
 */
import { z } from "zod";
import { ValidationError } from "./errors.js";

/** A zod 4 schema of one item, from `zod` or `zod/mini`. */
export type Schema = z.core.$ZodType;

/** A JSON Schema of the 2020-12 draft (the dialect of OpenAPI 3.1), as plain JSON. */
export type JsonSchema = { [key: string]: unknown };

// A 422 lists at most this many failing fields: a body with more is usually wrong as a whole,
// and the message stays readable.
const MAX_ISSUES = 5;

/**
 * Parses one item with its schema and returns the parsed value (defaults filled in, unknown
 * keys stripped, transforms applied). Throws a {@link ValidationError} whose message names each
 * failing field by its path, as in `items[2].x: expected number, received string`.
 */
export async function parseItem(schema: Schema, value: unknown): Promise<unknown> {
  const result = await z.safeParseAsync(schema, value, { error: typeMessage });
  if (result.success) return result.data;
  throw new ValidationError(describeIssues(result.error.issues));
}

/** The issues of a failed parse as one line: `path: message` for each, `; ` between them. */
function describeIssues(issues: readonly z.core.$ZodIssue[]): string {
  const shown = issues.slice(0, MAX_ISSUES).map((issue) => {
    const path = formatPath(issue.path);
    return path === "" ? issue.message : `${path}: ${issue.message}`;
  });
  if (issues.length > MAX_ISSUES) shown.push(`and ${issues.length - MAX_ISSUES} more`);
  return shown.join("; ");
}

/**
 * A path as a JavaScript accessor: `user.tags[2]`, `["content-type"]`, `[0].x` for an item of a
 * top-level array.
 */
function formatPath(path: readonly PropertyKey[]): string {
  let text = "";
  for (const key of path) {
    if (typeof key === "number") text += `[${key}]`;
    else if (typeof key === "string" && /^[A-Za-z_$][\w$]*$/.test(key)) text += text === "" ? key : `.${key}`;
    else text += `[${JSON.stringify(String(key))}]`;
  }
  return text;
}

/**
 * The JSON Schema of what `schema` accepts (`io: "input"`) or produces (`"output"`). Parts JSON
 * Schema cannot express (a transform, a `z.custom`) become `{}`, "anything", rather than failing.
 */
export function toJsonSchema(schema: Schema, io: "input" | "output"): JsonSchema {
  // The document that embeds it states the dialect once.
  const { $schema: _dialect, ...rest } = z.toJSONSchema(schema, { target: "draft-2020-12", io, unrepresentable: "any" });
  return rest;
}

// zod's own text for a wrong type starts with "Invalid input:"; after the path, the expected and
// received types say it all. A missing field says so, and a fraction where an integer belongs is
// shown. Other issues keep zod's text, and a message the schema sets itself wins over this one.
function typeMessage(issue: z.core.$ZodRawIssue): string | undefined {
  if (issue.code !== "invalid_type") return undefined;
  const { expected, input } = issue;
  if (input === undefined) return `missing (expected ${expected === "int" ? "integer" : expected})`;
  if (expected === "int" && typeof input === "number") return `expected integer, received ${input}`;
  return `expected ${expected}, received ${typeName(input)}`;
}

function typeName(value: unknown): string {
  if (value === null) return "null";
  if (Array.isArray(value)) return "array";
  if (typeof value === "number" && Number.isNaN(value)) return "NaN";
  if (ArrayBuffer.isView(value)) return value.constructor.name;
  return typeof value;
}
