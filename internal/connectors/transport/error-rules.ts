import { readDotPath } from "../../platform/dot-path.js";
import { IngestionError } from "../../platform/errors.js";
import { isJsonContentType, scanJsonLimits } from "../../platform/json-body.js";
import type { SecretRegistry } from "../../platform/redact.js";
import type { ConditionDefinition, ErrorRuleDefinition } from "../schema/connector-schema.js";

/**
 * Response conditions (docs/connectors.md, Errors inside responses): `errors` rules and `auth.expiredWhen`.
 * A condition matches when its `status` list holds the response's status
 * (without one: any 2xx status, since these conditions exist for errors
 * inside 200 answers) and its `path` test (if any) holds on the JSON body.
 *
 * Comparisons: a JSON number and a string holding the same decimal number
 * are equal (`403` and `"403"`), everything else compares strictly. A value
 * absent from the body never matches `equals`, `in` or `notIn`: absence is
 * what `exists: false` is for.
 */

function same(a: unknown, b: unknown): boolean {
  if (a === b) return true;
  if (typeof a === "number" && typeof b === "string") return b.trim() !== "" && Number(b) === a;
  if (typeof a === "string" && typeof b === "number") return a.trim() !== "" && Number(a) === b;
  return false;
}

/** True when `condition` holds for a response with `status` and parsed JSON `body` (undefined: not JSON). */
export function matchesCondition(condition: ConditionDefinition, status: number, body: unknown): boolean {
  if (condition.status !== undefined) {
    if (!condition.status.includes(status)) return false;
  } else if (status < 200 || status > 299) return false;
  if (condition.path === undefined) return true;
  if (body === undefined) return false;
  const value = readDotPath(body, condition.path);
  if (condition.exists !== undefined) return (value !== undefined) === condition.exists;
  if (value === undefined) return false;
  if (condition.equals !== undefined) return same(value, condition.equals);
  if (condition.in !== undefined) return condition.in.some((v) => same(value, v));
  if (condition.notIn !== undefined) return !condition.notIn.some((v) => same(value, v));
  return false;
}

/** Statuses outside 2xx that some condition names: those responses are read, not thrown. */
export function conditionStatuses(conditions: readonly ConditionDefinition[]): Set<number> {
  const out = new Set<number>();
  for (const c of conditions) for (const s of c.status ?? []) if (s < 200 || s > 299) out.add(s);
  return out;
}

/** True when a condition needs the body. */
export function needsBody(conditions: readonly ConditionDefinition[]): boolean {
  return conditions.some((c) => c.path !== undefined);
}

/**
 * The JSON body of a response for condition checks, or undefined when it is
 * not JSON (or not valid JSON: the records decoder reports that itself).
 * Depth is checked first, as for pages.
 */
export function bodyForConditions(body: Buffer, contentType: string | undefined, maxDepth: number): unknown {
  if (!isJsonContentType(contentType) || body.length === 0) return undefined;
  let text = body.toString("utf8");
  if (text.charCodeAt(0) === 0xfeff) text = text.slice(1);
  scanJsonLimits(text, { maxDepth, maxRecords: Number.MAX_SAFE_INTEGER, recordsPath: "" });
  try {
    return JSON.parse(text) as unknown;
  } catch {
    return undefined;
  }
}

function describe(rule: ErrorRuleDefinition, status: number, body: unknown): string {
  if (rule.path === undefined) return `HTTP ${status}`;
  const value = readDotPath(body, rule.path);
  const shown = value === undefined ? "missing" : (JSON.stringify(value) ?? String(value));
  return `${rule.path} = ${shown.length > 80 ? `${shown.slice(0, 80)}…` : shown}`;
}

/**
 * Applies `errors` rules in order; the first that matches decides.
 * @throws IngestionError retryable `SUPPLIER` for `then: "retry"`, or
 * permanent with the rule's `code` (default `CONTRACT`) for `then: "fail"`;
 * the supplier's message (at `messagePath`) is quoted, redacted (with `secrets`) and cut.
 */
export function applyErrorRules(
  rules: readonly ErrorRuleDefinition[],
  status: number,
  body: unknown,
  secrets: SecretRegistry,
): void {
  for (const rule of rules) {
    if (!matchesCondition(rule, status, body)) continue;
    const said = rule.messagePath === undefined ? undefined : readDotPath(body, rule.messagePath);
    const text =
      said === undefined || said === null
        ? ""
        : `: ${secrets.safeText(typeof said === "string" ? said : (JSON.stringify(said) ?? ""), 300)}`;
    const what = describe(rule, status, body);
    if (rule.then === "retry") {
      throw new IngestionError("SUPPLIER", `supplier reported a transient error (${what})${text}`, {
        retryable: true,
      });
    }
    throw new IngestionError(rule.code ?? "CONTRACT", `supplier reported an error (${what})${text}`);
  }
}
