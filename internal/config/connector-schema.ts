import { compile as compileJmesPath } from "@jmespath-community/jmespath";
import { z } from "zod";

/**
 * The connector definition file `config/suppliers/<name>.json` (DESIGN §3).
 * Unknown keys are rejected at every level; secrets are only ever named
 * (an env var or a file), never written in the file.
 */

const envName = z.string().regex(/^[A-Za-z_][A-Za-z0-9_]*$/, "must be an environment variable name");
const filePath = z.string().min(1);
const dotPath = z
  .string()
  .regex(/^$|^[^.\s]+(\.[^.\s]+)*$/, "must be a dot path like data.items (no empty segments)");
const requiredDotPath = dotPath.refine((p) => p.length > 0, "must not be empty");

/** A secret given either by env var name or by file path, never both. */
function secretRef<E extends string, F extends string>(envKey: E, fileKey: F) {
  return { [envKey]: envName.optional(), [fileKey]: filePath.optional() } as Record<
    E,
    z.ZodOptional<typeof envName>
  > &
    Record<F, z.ZodOptional<typeof filePath>>;
}

const authSchema = z.discriminatedUnion("type", [
  z.strictObject({ type: z.literal("none") }),
  z.strictObject({ type: z.literal("bearer"), ...secretRef("tokenEnv", "tokenFile") }),
  z.strictObject({
    type: z.literal("header"),
    name: z.string().regex(/^[A-Za-z0-9-]+$/, "must be an HTTP header name"),
    ...secretRef("valueEnv", "valueFile"),
  }),
  z.strictObject({
    type: z.literal("basic"),
    ...secretRef("usernameEnv", "usernameFile"),
    ...secretRef("passwordEnv", "passwordFile"),
  }),
]);

const paginationSchema = z.discriminatedUnion("type", [
  z.strictObject({ type: z.literal("none") }),
  z.strictObject({
    type: z.literal("page"),
    param: z.string().min(1).default("page"),
    start: z.number().int().min(0).default(1),
  }),
  z.strictObject({
    type: z.literal("offset"),
    offsetParam: z.string().min(1).default("offset"),
    limitParam: z.string().min(1).default("limit"),
    limit: z.number().int().min(1).max(100_000),
  }),
  z.strictObject({
    type: z.literal("cursor"),
    param: z.string().min(1).default("cursor"),
    cursorPath: requiredDotPath,
  }),
  z.strictObject({ type: z.literal("link") }),
]);

const positiveMs = z.number().int().positive();

/** A JMESPath expression, parsed here so a syntax error is a configuration error naming the key. */
const jmesPath = z
  .string()
  .min(1)
  .superRefine((expression, ctx) => {
    try {
      compileJmesPath(expression);
    } catch (err) {
      ctx.addIssue({
        code: "custom",
        message: `is not a valid JMESPath expression: ${(err as Error).message}`,
      });
    }
  });
const scalar = z.union([z.string(), z.number(), z.boolean(), z.null()]);
const nullIf = z.array(scalar).min(1);
const decimalSeparator = z.enum([",", "."]);

/**
 * Where a field's value comes from (DESIGN §3.7): a dot path, `{path}`, `{jmespath}`
 * or `{const}`; `nullIf` turns listed values into null; `decimalSeparator` (price and
 * stock) reads `"1 234,50"` as 1234.50.
 */
function fieldSpec(numeric: boolean) {
  const extra = numeric
    ? { nullIf: nullIf.optional(), decimalSeparator: decimalSeparator.optional() }
    : { nullIf: nullIf.optional() };
  return z.union(
    [
      requiredDotPath,
      z.strictObject({ path: dotPath, ...extra }),
      z.strictObject({ jmespath: jmesPath, ...extra }),
      z.strictObject({ const: scalar, ...extra }),
    ],
    { error: "must be a dot path, or an object with one of path, jmespath or const" },
  );
}
const textField = fieldSpec(false);
const numericField = fieldSpec(true);

/** Attribute names (keys of `attributes`): identifiers, kept as JSON object keys. */
const attributeName = z
  .string()
  .regex(/^[A-Za-z_][A-Za-z0-9_]{0,62}$/, "must match ^[A-Za-z_][A-Za-z0-9_]{0,62}$");
const MAX_ATTRIBUTES = 64;

export const connectorDefinitionSchema = z
  .strictObject({
    /** Hand-written connector from the code registry; the declarative connector when absent. */
    module: z
      .string()
      .regex(/^[a-z][a-z0-9_-]*$/)
      .optional(),
    /** Settings for a hand-written connector, validated by that module. */
    settings: z.record(z.string(), z.unknown()).optional(),
    baseUrl: z.url({ protocol: /^https?$/, error: "must be an http(s) URL" }),
    /** Extra origins (scheme://host:port) pages may be fetched from; credentials are never sent there. */
    allowedOrigins: z.array(z.url({ protocol: /^https?$/ })).default([]),
    auth: authSchema.default({ type: "none" }),
    rateLimit: z
      .strictObject({
        requestsPerSecond: z.number().positive().max(10_000).default(5),
        burst: z.number().int().min(1).max(10_000).default(5),
        maxConcurrency: z.number().int().min(1).max(64).default(2),
      })
      .prefault({}),
    timeouts: z
      .strictObject({
        connectMs: positiveMs.default(5_000),
        requestMs: positiveMs.default(30_000),
        pageMs: positiveMs.default(120_000),
        runMs: positiveMs.default(3_600_000),
      })
      .prefault({}),
    retry: z
      .strictObject({
        maxAttempts: z.number().int().min(1).max(20).default(5),
        baseDelayMs: z.number().int().min(0).default(500),
        maxDelayMs: z.number().int().min(0).default(30_000),
        maxRetryAfterMs: z.number().int().min(0).default(120_000),
      })
      .prefault({}),
    request: z
      .strictObject({
        path: z.string().startsWith("/", "must start with /").default("/"),
        query: z.record(z.string(), z.string()).default({}),
        headers: z.record(z.string(), z.string()).default({}),
      })
      .prefault({}),
    pagination: paginationSchema.default({ type: "none" }),
    records: z.strictObject({ path: dotPath }).prefault({ path: "" }),
    fields: z
      .strictObject({
        sku: textField,
        price: numericField,
        name: textField.optional(),
        currency: textField.optional(),
        stock: numericField.optional(),
      })
      .optional(),
    /** Further supplier data kept with each offer as one JSON object (`supplier_offers.attributes`). */
    attributes: z
      .record(attributeName, numericField)
      .refine((a) => Object.keys(a).length <= MAX_ATTRIBUTES, `at most ${MAX_ATTRIBUTES} attributes`)
      .optional(),
    maxResponseBytes: z.number().int().positive().default(52_428_800),
    maxRejectRatio: z.number().min(0).max(1).default(0.5),
    /** Deepest JSON nesting accepted in a response body. */
    maxJsonDepth: z.number().int().min(2).max(1_000).default(64),
    /** Most records accepted on one page. */
    maxRecordsPerPage: z.number().int().min(1).max(1_000_000).default(100_000),
  })
  .superRefine((def, ctx) => {
    if (!def.module && !def.fields) {
      ctx.addIssue({
        code: "custom",
        path: ["fields"],
        message: "is required for the declarative connector",
      });
    }
    if (def.auth.type === "bearer") bothForms(ctx, def.auth, "tokenEnv", "tokenFile", true);
    if (def.auth.type === "header") bothForms(ctx, def.auth, "valueEnv", "valueFile", true);
    if (def.auth.type === "basic") {
      bothForms(ctx, def.auth, "usernameEnv", "usernameFile", true);
      bothForms(ctx, def.auth, "passwordEnv", "passwordFile", true);
    }
  });

function bothForms(
  ctx: z.RefinementCtx,
  auth: Record<string, unknown>,
  envKey: string,
  fileKey: string,
  required: boolean,
): void {
  const hasEnv = auth[envKey] !== undefined;
  const hasFile = auth[fileKey] !== undefined;
  if (hasEnv && hasFile) {
    ctx.addIssue({
      code: "custom",
      path: ["auth", fileKey],
      message: `set either ${envKey} or ${fileKey}, not both`,
    });
  } else if (required && !hasEnv && !hasFile) {
    ctx.addIssue({
      code: "custom",
      path: ["auth", envKey],
      message: `one of ${envKey} or ${fileKey} is required`,
    });
  }
}

/** A validated connector definition with defaults applied. */
export type ConnectorDefinition = z.output<typeof connectorDefinitionSchema>;
export type AuthDefinition = ConnectorDefinition["auth"];
export type PaginationDefinition = ConnectorDefinition["pagination"];
export type FieldsDefinition = NonNullable<ConnectorDefinition["fields"]>;
export type AttributesDefinition = NonNullable<ConnectorDefinition["attributes"]>;
export type FieldSpec = FieldsDefinition["price"];
