/**
 * Where a connector file's JSON is broken, said as an editor says it: `line:column`,
 * the error, and the offending line. JSON.parse decides whether the text is valid (the
 * contract); jsonc-parser (comments and trailing commas refused) only locates the error.
 */
import { type ParseError, parse, printParseErrorCode } from "jsonc-parser";
import type { z } from "zod";

/** Longest offending line quoted in the message. */
const QUOTED_LINE_CHARS = 120;

/** `invalid JSON at 3:12 (ValueExpected): \`  "price": ,\`` for text JSON.parse refused with `fallback`. */
export function describeJsonError(text: string, fallback: string): string {
  const errors: ParseError[] = [];
  parse(text, errors, { disallowComments: true, allowTrailingComma: false, allowEmptyContent: false });
  const first = errors[0];
  if (!first) return `invalid JSON: ${fallback}`;
  const { line, column, lineText } = locate(text, first.offset);
  const quoted = lineText.length > QUOTED_LINE_CHARS ? `${lineText.slice(0, QUOTED_LINE_CHARS)}…` : lineText;
  return `invalid JSON at line ${line}, column ${column} (${printParseErrorCode(first.error)}): \`${quoted}\``;
}

/** 1-based line and column (in UTF-16 code units, as editors count) of `offset`, and that line's text. */
export function locate(text: string, offset: number): { line: number; column: number; lineText: string } {
  const before = text.slice(0, offset);
  const lineStart = Math.max(before.lastIndexOf("\n") + 1, 0);
  const line = (before.match(/\n/g)?.length ?? 0) + 1;
  const end = text.indexOf("\n", lineStart);
  const lineText = text.slice(lineStart, end === -1 ? text.length : end).replace(/\r$/, "");
  return { line, column: offset - lineStart + 1, lineText };
}

/**
 * The issues of a schema check where a required key is absent from its object (zod's
 * `invalid_type` or `invalid_union` at a path whose last key the input object lacks) say
 * `missing` instead of "expected string, received undefined".
 */
export function withMissingKeys(issues: readonly z.core.$ZodIssue[], input: unknown): z.core.$ZodIssue[] {
  return issues.map((issue) => {
    if ((issue.code !== "invalid_type" && issue.code !== "invalid_union") || issue.path.length === 0)
      return issue;
    const parent = valueAt(input, issue.path.slice(0, -1));
    const key = issue.path[issue.path.length - 1];
    if (parent === null || typeof parent !== "object" || Array.isArray(parent)) return issue;
    if (typeof key !== "string" || Object.hasOwn(parent, key)) return issue;
    // zod's own wording ("Invalid input: expected string, received undefined") gives way; a schema's own stays.
    const message =
      issue.code === "invalid_type" && issue.message.startsWith("Invalid input: expected")
        ? `missing (required: ${issue.expected})`
        : `missing: ${issue.message}`;
    return { ...issue, message };
  });
}

function valueAt(input: unknown, path: readonly PropertyKey[]): unknown {
  let value = input;
  for (const key of path) {
    if (value === null || typeof value !== "object") return undefined;
    value = (value as Record<PropertyKey, unknown>)[key];
  }
  return value;
}

/**
 * One line per zod issue, `path: message`, e.g. `auth.tokenEnv: ...`, `Unrecognized key: "bogus"`
 * or, with the `input` checked, `records: missing (required: object)`.
 */
export function formatSchemaIssues(issues: readonly z.core.$ZodIssue[], input?: unknown): string {
  const unwrapped = issues.flatMap((issue) => unwrapUnion(issue, []));
  // Given the input, a required key it lacks says `missing`.
  return (input === undefined ? unwrapped : withMissingKeys(unwrapped, input))
    .map((issue) => {
      const path = issue.path.map(String).join(".");
      return path ? `${path}: ${issue.message}` : issue.message;
    })
    .join("; ");
}

/**
 * A union's failure says more through the one alternative the value was clearly meant
 * for: `{"jmespath": "sum("}` is a field spec of the `jmespath` form with a bad
 * expression, not "invalid input". An alternative counts when none of its issues is at
 * the union's own level (wrong type, unknown keys); with none or several such, the
 * union's own message stands.
 */
function unwrapUnion(issue: z.core.$ZodIssue, prefix: PropertyKey[]): z.core.$ZodIssue[] {
  const path = [...prefix, ...issue.path];
  // A record key that fails its schema: say why (`attributes.1x: must match …`).
  if (issue.code === "invalid_key") return issue.issues.map((i) => ({ ...i, path }));
  if (issue.code !== "invalid_union" || issue.errors.length === 0) return [{ ...issue, path }];
  const meant = issue.errors.filter((branch) =>
    branch.every((i) => i.path.length > 0 && i.code !== "unrecognized_keys"),
  );
  const [only] = meant;
  if (meant.length !== 1 || !only) return [{ ...issue, path }];
  return only.flatMap((i) => unwrapUnion(i, path));
}
