import type { z } from "zod";
import { ShoalError } from "../../errors.js";

/**
 * OpenAI's error body: its type by status, and a code (the error table's, lower-cased; an
 * unknown model's is OpenAI's own).
 */
export function openAIError(error: ShoalError, code: string | null = error.code === "NOT_FOUND" ? "model_not_found" : error.code.toLowerCase()): unknown {
  const type = error.status === 401 || error.status === 403 ? "authentication_error" : error.status < 500 ? "invalid_request_error" : "server_error";
  return { error: { message: error.publicMessage, type, param: null, code } };
}

/** The 400 for a body its schema refuses: the first issue, with the field it is about. */
export function badRequest(error: z.ZodError): ShoalError {
  const issue = error.issues[0]!;
  return new ShoalError("BAD_REQUEST", `${issue.path.length > 0 ? `${issue.path.join(".")}: ` : ""}${issue.message}`);
}
