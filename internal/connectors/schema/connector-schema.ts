import { compile as compileJmesPath } from "@jmespath-community/jmespath";
import { z } from "zod";
import {
  formatSchema,
  isFlatFormat,
  isStreamedFormat,
  STREAMED_MAX_RESPONSE_BYTES,
  XLS_MAX_RESPONSE_BYTES,
} from "../../feeds/format-schema.js";
import {
  datePatternProblem,
  datePatternsIn,
  KNOWN_PLACEHOLDERS,
  placeholdersIn,
  SKU_LIST,
  stringsIn,
} from "./placeholders.js";

/** `module` values naming a file of the connectors folder rather than a registered module. */
export const MODULE_FILE = /^\.\/(?:[^/\\\0]+\/)*[^/\\\0]+\.mjs$/;
/**
 * The connector definition file `config/suppliers/<name>.json` (docs/connectors.md).
 * Unknown keys are rejected at every level; secrets are only ever named
 * (an env var or a file), never written in the file.
 */

const envName = z.string().regex(/^[A-Za-z_][A-Za-z0-9_]*$/, "must be an environment variable name");
const filePath = z.string().min(1);
const dotPath = z
  .string()
  .regex(/^$|^[^.\s]+(\.[^.\s]+)*$/, "must be a dot path like data.items (no empty segments)");
const requiredDotPath = dotPath.refine((p) => p.length > 0, "must not be empty");

/**
 * The secret slots of `auth` blocks: each given by an environment variable's name or by a
 * file's path, never both. Declared once: the schema below and the credentials check
 * (credentials.ts, `slotRef`) both read the keys from here.
 */
export const SECRET_SLOTS = {
  token: { label: "auth.token", envKey: "tokenEnv", fileKey: "tokenFile" },
  value: { label: "auth.value", envKey: "valueEnv", fileKey: "valueFile" },
  username: { label: "auth.username", envKey: "usernameEnv", fileKey: "usernameFile" },
  password: { label: "auth.password", envKey: "passwordEnv", fileKey: "passwordFile" },
  clientId: { label: "auth.clientId", envKey: "clientIdEnv", fileKey: "clientIdFile" },
  clientSecret: { label: "auth.clientSecret", envKey: "clientSecretEnv", fileKey: "clientSecretFile" },
} as const;

export type SecretSlot = (typeof SECRET_SLOTS)[keyof typeof SECRET_SLOTS];

/** A slot's two keys in a schema. */
function secretRef<S extends SecretSlot>(slot: S) {
  return { [slot.envKey]: envName.optional(), [slot.fileKey]: filePath.optional() } as Record<
    S["envKey"],
    z.ZodOptional<typeof envName>
  > &
    Record<S["fileKey"], z.ZodOptional<typeof filePath>>;
}

const headerName = z.string().regex(/^[A-Za-z0-9!#$%&'*+.^_`|~-]+$/, "must be an HTTP header name");
const cookieName = z.string().regex(/^[A-Za-z0-9!#$%&'*+.^_`|~-]+$/, "must be a cookie name");
const jsonScalar = z.union([z.string(), z.number(), z.boolean(), z.null()]);
const httpStatus = z.number().int().min(100).max(599);

/**
 * A response condition (docs/connectors.md, Errors inside responses), shared by `errors`, `auth.expiredWhen`
 * and the export conditions: a `path` with exactly one of `equals`, `in`,
 * `notIn`, `exists`, and/or `status`; when both are given both must hold.
 */
const conditionShape = {
  path: requiredDotPath.optional(),
  equals: jsonScalar.optional(),
  in: z.array(jsonScalar).min(1).optional(),
  notIn: z.array(jsonScalar).min(1).optional(),
  exists: z.boolean().optional(),
  status: z.array(httpStatus).min(1).optional(),
};

function checkCondition(c: Record<string, unknown>, ctx: z.RefinementCtx): void {
  const matchers = ["equals", "in", "notIn", "exists"].filter((k) => c[k] !== undefined);
  if (c.path !== undefined && matchers.length !== 1) {
    ctx.addIssue({
      code: "custom",
      path: ["path"],
      message: "needs exactly one of equals, in, notIn or exists",
    });
  }
  if (c.path === undefined && matchers.length > 0) {
    ctx.addIssue({ code: "custom", path: [matchers[0] as string], message: "needs a path" });
  }
  if (c.path === undefined && c.status === undefined) {
    ctx.addIssue({ code: "custom", path: [], message: "needs a path or a status list" });
  }
}

export const conditionSchema = z.strictObject(conditionShape).superRefine(checkCondition);

/** Codes an `errors` rule may fail a step with. */
export const ERROR_RULE_CODES = ["SUPPLIER", "CONTRACT", "AUTH", "RATE_LIMITED", "NETWORK"] as const;

const errorRuleSchema = z
  .strictObject({
    ...conditionShape,
    // biome-ignore lint/suspicious/noThenProperty: the key is public (docs/connectors.md, Conditions); its value is a string, never callable.
    then: z.enum(["retry", "fail"]),
    code: z.enum(ERROR_RULE_CODES).optional(),
    /** Dot path of the supplier's own message, quoted in the step's error. */
    messagePath: requiredDotPath.optional(),
  })
  .superRefine((rule, ctx) => {
    checkCondition(rule, ctx);
    if (rule.then === "retry" && rule.code !== undefined) {
      ctx.addIssue({ code: "custom", path: ["code"], message: 'is only for "then": "fail"' });
    }
  });

/** A literal string, or a secret named by env var or file (`{ "env": "NAME" }`, `{ "file": "path" }`). */
export const secretValueSchema = z.union(
  [z.string(), z.strictObject({ env: envName }), z.strictObject({ file: filePath })],
  { error: 'must be a string, { "env": "NAME" } or { "file": "path" }' },
);
export type SecretValue = z.output<typeof secretValueSchema>;

/** `body` and `form` go with POST only, and not together (docs/connectors.md, Requests). */
function checkRequestBody(r: { method: string; body?: unknown; form?: unknown }, ctx: z.RefinementCtx): void {
  if (r.body !== undefined && r.form !== undefined) {
    ctx.addIssue({ code: "custom", path: ["form"], message: "set either body or form, not both" });
  }
  for (const key of ["body", "form"] as const) {
    if (r[key] !== undefined && r.method !== "POST") {
      ctx.addIssue({ code: "custom", path: [key], message: 'needs "method": "POST"' });
    }
  }
}

const requestPath = z.string().startsWith("/", "must start with /");
const httpMethod = z.enum(["GET", "POST"]).default("GET");

/** The login request of a session: any value may be a secret reference. */
const loginSchema = z
  .strictObject({
    method: httpMethod,
    path: requestPath,
    query: z.record(z.string(), secretValueSchema).default({}),
    headers: z.record(headerName, secretValueSchema).default({}),
    body: z.unknown().optional(),
    form: z.record(z.string(), secretValueSchema).optional(),
    /**
     * Values of `{name}` placeholders in `path`, percent-encoded (a key in the URL's path, as
     * DKC's `/auth.access.token/{master_key}`); secrets are redacted wherever the URL is shown.
     */
    pathParams: z
      .record(
        z.string().regex(/^[a-z][a-z0-9_]*$/, "must be a lower-case placeholder name, e.g. master_key"),
        secretValueSchema,
      )
      .optional(),
  })
  .superRefine(checkRequestBody);

function exactlyOne(keys: readonly string[]) {
  return (value: Record<string, unknown>, ctx: z.RefinementCtx) => {
    const set = keys.filter((k) => value[k] !== undefined);
    if (set.length !== 1) {
      ctx.addIssue({ code: "custom", path: [], message: `set exactly one of ${keys.join(", ")}` });
    }
  };
}

const sessionAuthSchema = z.strictObject({
  type: z.literal("session"),
  login: loginSchema,
  /** Where the token is in the login response. */
  token: z
    .strictObject({
      path: requiredDotPath.optional(),
      header: headerName.optional(),
      cookie: cookieName.optional(),
    })
    .superRefine(exactlyOne(["path", "header", "cookie"])),
  /** How later requests carry the token. */
  send: z
    .strictObject({
      query: z.string().min(1).optional(),
      header: headerName.optional(),
      prefix: z.string().optional(),
      cookie: cookieName.optional(),
    })
    .superRefine((send, ctx) => {
      exactlyOne(["query", "header", "cookie"])(send, ctx);
      if (send.prefix !== undefined && send.header === undefined) {
        ctx.addIssue({ code: "custom", path: ["prefix"], message: "goes with header only" });
      }
      if (send.prefix !== undefined && /[\r\n\0]/.test(send.prefix)) {
        ctx.addIssue({ code: "custom", path: ["prefix"], message: "must not contain a line break" });
      }
    }),
  /** The token is reused until 90 % of this has passed since the login. */
  ttlMs: z.number().int().positive().default(3_600_000),
  /** Least time between two login requests of this process for this supplier. */
  minLoginIntervalMs: z.number().int().min(0).max(86_400_000).default(0),
  /** Responses that mean the session expired: log in once more and repeat the request. */
  expiredWhen: z
    .array(conditionSchema)
    .min(1)
    .default([{ status: [401] }]),
});

const authSchema = z.discriminatedUnion("type", [
  z.strictObject({ type: z.literal("none") }),
  z.strictObject({ type: z.literal("bearer"), ...secretRef(SECRET_SLOTS.token) }),
  z.strictObject({
    type: z.literal("header"),
    name: z.string().regex(/^[A-Za-z0-9-]+$/, "must be an HTTP header name"),
    ...secretRef(SECRET_SLOTS.value),
  }),
  z.strictObject({
    type: z.literal("basic"),
    ...secretRef(SECRET_SLOTS.username),
    ...secretRef(SECRET_SLOTS.password),
  }),
  z.strictObject({
    type: z.literal("query"),
    /** The query parameter that carries the secret on every request to the supplier's origin. */
    param: z.string().min(1),
    ...secretRef(SECRET_SLOTS.value),
  }),
  z.strictObject({
    type: z.literal("oauth2"),
    /** Token endpoint on the supplier's origin (client-credentials grant, form POST). */
    tokenPath: requestPath,
    ...secretRef(SECRET_SLOTS.clientId),
    ...secretRef(SECRET_SLOTS.clientSecret),
    scope: z.string().min(1).optional(),
    /** How the client authenticates to the token endpoint: form fields (default) or HTTP Basic. */
    clientAuth: z.enum(["body", "basic"]).default("body"),
  }),
  sessionAuthSchema,
]);

const paginationSchema = z.discriminatedUnion("type", [
  z.strictObject({ type: z.literal("none") }),
  z
    .strictObject({
      type: z.literal("page"),
      param: z.string().min(1).default("page"),
      start: z.number().int().min(0).default(1),
      /** Page size parameter and value, sent on every page. */
      sizeParam: z.string().min(1).optional(),
      size: z.number().int().min(1).max(100_000).optional(),
      /** Dot path of the number of pages; the walk stops after that page. */
      totalPagesPath: requiredDotPath.optional(),
      hasMorePath: requiredDotPath.optional(),
    })
    .superRefine((p, ctx) => {
      if ((p.sizeParam === undefined) !== (p.size === undefined)) {
        ctx.addIssue({
          code: "custom",
          path: [p.sizeParam === undefined ? "sizeParam" : "size"],
          message: "sizeParam and size go together",
        });
      }
    }),
  z.strictObject({
    type: z.literal("offset"),
    offsetParam: z.string().min(1).default("offset"),
    limitParam: z.string().min(1).default("limit"),
    limit: z.number().int().min(1).max(100_000),
    /** Dot path of the total number of records; the walk stops when the offset reaches it. */
    totalPath: requiredDotPath.optional(),
    hasMorePath: requiredDotPath.optional(),
  }),
  z
    .strictObject({
      type: z.literal("cursor"),
      param: z.string().min(1).default("cursor"),
      cursorPath: requiredDotPath.optional(),
      cursorHeader: headerName.optional(),
      /** Dot path into the page's last record, as in `starting_after=<last id>`. */
      lastRecordPath: requiredDotPath.optional(),
      hasMorePath: requiredDotPath.optional(),
    })
    .superRefine(exactlyOne(["cursorPath", "cursorHeader", "lastRecordPath"])),
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

/** The tests of `nullWhen`: exactly one per condition. */
const NULL_WHEN_TESTS = ["equals", "in", "notIn", "exists", "contains"] as const;

/**
 * `nullWhen` (docs/connectors.md, Records and fields): a condition on the record the field is read
 * from, shaped like a response condition (a `path` with exactly one test), plus `contains`
 * (a string value holding that text). When it holds, the field is null.
 */
const nullWhen = z
  .strictObject({
    path: requiredDotPath,
    equals: jsonScalar.optional(),
    in: z.array(jsonScalar).min(1).optional(),
    notIn: z.array(jsonScalar).min(1).optional(),
    exists: z.boolean().optional(),
    contains: z.string().min(1).optional(),
  })
  .superRefine((c, ctx) => {
    if (NULL_WHEN_TESTS.filter((k) => c[k] !== undefined).length !== 1) {
      ctx.addIssue({ code: "custom", message: "needs exactly one of equals, in, notIn, exists or contains" });
    }
  });

const FIELD_SPEC_FORMS = "must be a dot path, or an object with one of path, jmespath or const";

/**
 * Where a field's value comes from (docs/connectors.md, Records and fields): a dot path, `{path}`, `{jmespath}`
 * or `{const}`; `else` (a spec of those forms) is read when the first finds nothing; `nullIf`
 * turns listed values into null, `nullWhen` a condition on the record. Price, stock and
 * attributes: `sum` adds the list (or object values) found as exact decimals, nothing found
 * being no value; `decimalSeparator` reads `"1 234,50"` as 1234.50.
 */
function fieldSpec(numeric: boolean, path: z.ZodType<string> = dotPath) {
  const requiredPath = path.refine((p) => p.length > 0, "must not be empty");
  const modifiers = numeric
    ? {
        nullIf: nullIf.optional(),
        nullWhen: nullWhen.optional(),
        decimalSeparator: decimalSeparator.optional(),
      }
    : { nullIf: nullIf.optional(), nullWhen: nullWhen.optional() };
  const sum = numeric ? { sum: z.boolean().optional() } : {};
  const fallback = z.union(
    [
      requiredPath,
      z.strictObject({ path, ...sum }),
      z.strictObject({ jmespath: jmesPath, ...sum }),
      z.strictObject({ const: scalar }),
    ],
    { error: FIELD_SPEC_FORMS },
  );
  return z.union(
    [
      requiredPath,
      z.strictObject({ path, ...modifiers, ...sum, else: fallback.optional() }),
      z.strictObject({ jmespath: jmesPath, ...modifiers, ...sum, else: fallback.optional() }),
      z.strictObject({ const: scalar, ...modifiers }),
    ],
    { error: FIELD_SPEC_FORMS },
  );
}
const textField = fieldSpec(false);
const numericField = fieldSpec(true);
/**
 * A column's header text as a whole (`Цена, руб. с НДС`): the paths of a workbook's flat
 * records (docs/feeds.md, Workbooks). The main `fields` and `attributes` take it, and the
 * definition checks them as dot paths unless `format` is a workbook.
 */
const columnPath = z
  .string()
  .max(1_000)
  .regex(/^[^\u0000-\u001f]*$/, "must not hold control characters");
const textColumnField = fieldSpec(false, columnPath);
const numericColumnField = fieldSpec(true, columnPath);

/** Attribute names (keys of `attributes`): identifiers, kept as JSON object keys. */
const attributeName = z
  .string()
  .regex(/^[A-Za-z_][A-Za-z0-9_]{0,62}$/, "must match ^[A-Za-z_][A-Za-z0-9_]{0,62}$");
const MAX_ATTRIBUTES = 64;
/** `attributes` of the connector and of an enrichment: name → field spec. */
const attributesSchema = z
  .record(attributeName, numericField)
  .refine((a) => Object.keys(a).length <= MAX_ATTRIBUTES, `at most ${MAX_ATTRIBUTES} attributes`);

/** The keys of a request (docs/connectors.md, Requests). */
const requestShape = {
  method: httpMethod,
  path: requestPath.default("/"),
  query: z.record(z.string(), z.string()).default({}),
  headers: z.record(z.string(), z.string()).default({}),
  /** JSON body of a POST, sent as application/json. */
  body: z.unknown().optional(),
  /** Form of a POST, sent as application/x-www-form-urlencoded. */
  form: z.record(z.string(), z.string()).optional(),
  /** A dated file (`{date:…}` in path or query): a 404 tries the day before, up to this many days back. */
  dateFallbackDays: z
    .number({ error: "must be a number" })
    .int("must be an integer")
    .min(0, "must be at least 0")
    .max(366, "must be at most 366")
    .optional(),
};

/** A request template of a partition list or an enrichment (docs/connectors.md, Requests): the main request's keys. */
const requestSchema = z.strictObject(requestShape).superRefine(checkRequestBody);

/**
 * An export job (docs/feeds.md, Export jobs): create it, poll it every `intervalMs` until
 * `readyWhen` (or `failWhen`) matches, then download the file at
 * `download.urlPath` of the ready poll response and walk it with `format`.
 */
const exportSchema = z.strictObject({
  create: z.strictObject({ ...requestShape, jobIdPath: requiredDotPath }).superRefine(checkRequestBody),
  poll: z
    .strictObject({
      ...requestShape,
      intervalMs: positiveMs.default(15_000),
      readyWhen: conditionSchema,
      failWhen: conditionSchema.optional(),
    })
    .superRefine(checkRequestBody),
  download: z.strictObject({ urlPath: requiredDotPath }),
});

const recordsSchema = z.strictObject({ path: dotPath });
const batchSize = z.number().int().min(1).max(10_000).default(1);
const skuSeparator = z.string().min(1).max(8).default(",");

/** Partitions (docs/connectors.md, Partitions): static values, or a list read from a request with its own pagination. */
const partitionsSchema = z.union(
  [
    z.strictObject({ values: z.array(z.string().min(1)).min(1) }),
    z.strictObject({
      request: requestSchema,
      records: recordsSchema,
      value: textField,
      pagination: paginationSchema.default({ type: "none" }),
    }),
  ],
  { error: "must be { values: [...] } or { request, records, value }" },
);

/** SKU lists (docs/connectors.md, SKU lists): a file of the connectors folder or a read-only SQL query. */
const skuListShape = {
  batch: batchSize,
  separator: skuSeparator,
  allowEmpty: z.boolean().default(false),
};
const skusSchema = z.discriminatedUnion("from", [
  z.strictObject({ from: z.literal("file"), file: filePath, ...skuListShape }),
  z.strictObject({ from: z.literal("sql"), query: z.string().trim().min(1), ...skuListShape }),
]);

/** An enrichment (docs/connectors.md, Enrichment): fields from a second endpoint, merged by SKU before validation. */
const enrichSchema = z
  .strictObject({
    request: requestSchema,
    records: recordsSchema.prefault({ path: "" }),
    /** The SKU in an enrichment record; may be left out with batch 1. */
    key: textField.optional(),
    batch: batchSize,
    fields: z
      .strictObject({
        price: numericField.optional(),
        name: textField.optional(),
        currency: textField.optional(),
        stock: numericField.optional(),
      })
      .optional(),
    attributes: attributesSchema.optional(),
    onMissing: z.literal("fail").optional(),
  })
  .superRefine((e, ctx) => {
    if (e.batch > 1 && e.key === undefined) {
      ctx.addIssue({ code: "custom", path: ["key"], message: "is required when batch is more than 1" });
    }
    if (Object.keys(e.fields ?? {}).length === 0 && Object.keys(e.attributes ?? {}).length === 0) {
      ctx.addIssue({ code: "custom", path: ["fields"], message: "an enrichment needs fields or attributes" });
    }
  });

/** `fields` of a definition: paths are dot paths, or header texts of a workbook's columns (checked by the definition). */
const definitionFieldsSchema = z.strictObject({
  sku: textColumnField,
  price: numericColumnField.optional(),
  name: textColumnField.optional(),
  currency: textColumnField.optional(),
  stock: numericColumnField.optional(),
});
const definitionAttributesSchema = z
  .record(attributeName, numericColumnField)
  .refine((a) => Object.keys(a).length <= MAX_ATTRIBUTES, `at most ${MAX_ATTRIBUTES} attributes`);

/** The main record's field specs (docs/connectors.md, Records and fields); also what a connector module's `lib.normalizeRecords` takes. */
export const fieldsSchema = z.strictObject({
  sku: textField,
  /** Required here unless an `enrich` entry maps it (docs/connectors.md, Records and fields). */
  price: numericField.optional(),
  name: textField.optional(),
  currency: textField.optional(),
  stock: numericField.optional(),
});

/**
 * The guards (docs/connectors.md, Guards), each key tunable; the defaults are those of a
 * definition without `guards`.
 */
const guardSettingsSchema = z.strictObject({
  /** A complete walk that would delist more than this share of the listed offers ... */
  maxDelistRatio: z.number().min(0, "must be from 0 to 1").max(1, "must be from 0 to 1").default(0.25),
  /** ... and more than this many offers holds the delisting. */
  minDelistCount: z.number().int("must be a whole number").min(0, "must not be negative").default(20),
  /** A price at least this many times its stored one, or at most its 1/factor, is held. */
  priceJumpFactor: z.number().gt(1, "must be greater than 1").max(1e6, "must be at most 1000000").default(10),
  /** An offer whose currency differs from its stored one is held. */
  currencyChange: z.boolean().default(true),
});

export const guardsSchema = z
  .union([z.literal(false), guardSettingsSchema], {
    error: (issue) =>
      issue.code === "invalid_union" ? "must be false or an object of guard settings" : undefined,
  })
  .default(() => guardSettingsSchema.parse({}));

export const connectorDefinitionSchema = z
  .strictObject({
    /**
     * Hand-written connector (docs/connector-modules.md): a name from the code registry, or `./<file>.mjs`,
     * an ES module of the connectors folder; the declarative connector when absent.
     */
    module: z
      .string()
      .refine((m) => /^[a-z][a-z0-9_-]*$/.test(m) || MODULE_FILE.test(m), {
        message: 'must be a registered module name or "./<file>.mjs" (a file of the connectors folder)',
      })
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
    request: z.strictObject(requestShape).superRefine(checkRequestBody).prefault({}),
    /** Conditions checked on every JSON response of the walk, before its records are read (docs/connectors.md, Errors inside responses). */
    errors: z.array(errorRuleSchema).default([]),
    pagination: paginationSchema.default({ type: "none" }),
    /**
     * Conditional requests (docs/conditional-requests.md): a walk that is one request sends back the last
     * succeeded run's `ETag` / `Last-Modified`; a 304 ends the run with nothing fetched.
     */
    conditional: z.boolean().default(true),
    records: z.strictObject({ path: dotPath }).prefault({ path: "" }),
    fields: definitionFieldsSchema.optional(),
    /** Further supplier data kept with each offer as one JSON object (`supplier_offers.attributes`). */
    attributes: definitionAttributesSchema.optional(),
    /** Walk the main request once per partition value, `{partition}` substituted (docs/connectors.md, Partitions). */
    partitions: partitionsSchema.optional(),
    /** Walk the main request once per batch of SKUs, `{skus}`/`{sku}` substituted (docs/connectors.md, SKU lists). */
    skus: skusSchema.optional(),
    /** Fields from other endpoints merged into each step's records before validation (docs/connectors.md, Enrichment). */
    enrich: z.array(enrichSchema).min(1).optional(),
    /** How the body is read (docs/feeds.md): JSON parsed whole (default), or a streamed feed. */
    format: formatSchema.optional(),
    /** Build the catalog file as an export job, then download and walk it (docs/feeds.md, Export jobs). */
    export: exportSchema.optional(),
    /** Absent: 52,428,800 for a JSON body read whole, 4 GiB (decompressed) for a streamed format (docs/feeds.md). */
    maxResponseBytes: z.number().int().positive().optional(),
    maxRejectRatio: z.number().min(0).max(1).default(0.5),
    /** Hold implausible data for an operator (docs/connectors.md, Guards): on by default; `false` turns them off. */
    guards: guardsSchema,
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
    if (def.auth.type === "query") bothForms(ctx, def.auth, "valueEnv", "valueFile", true);
    if (def.auth.type === "oauth2") {
      bothForms(ctx, def.auth, "clientIdEnv", "clientIdFile", true);
      bothForms(ctx, def.auth, "clientSecretEnv", "clientSecretFile", true);
    }
    if (
      def.fields &&
      def.fields.price === undefined &&
      !def.enrich?.some((e) => e.fields?.price !== undefined)
    ) {
      ctx.addIssue({
        code: "custom",
        path: ["fields", "price"],
        message: "is required, here or in the fields of an enrich entry",
      });
    }
    if (def.partitions !== undefined && def.skus !== undefined) {
      ctx.addIssue({ code: "custom", path: ["skus"], message: "cannot be combined with partitions" });
    }
    if (def.skus !== undefined && def.pagination.type !== "none") {
      ctx.addIssue({
        code: "custom",
        path: ["pagination"],
        message: "a SKU batch is one request: pagination cannot be combined with skus",
      });
    }
    checkFeedCombinations(def, ctx);
    checkPlaceholders(def, ctx);
    checkFieldPaths(def, ctx);
  })
  .transform((def) => ({
    ...def,
    /** In force: the definition's, else the default of its format (docs/connectors.md, Common keys; docs/feeds.md). */
    maxResponseBytes: def.maxResponseBytes ?? defaultMaxResponseBytes(def.format),
  }));

/** `maxResponseBytes` of a JSON body read whole when the definition sets none (docs/connectors.md, Common keys). */
export const DEFAULT_MAX_RESPONSE_BYTES = 52_428_800;

function defaultMaxResponseBytes(format: z.output<typeof formatSchema> | undefined): number {
  if (format?.type === "xls") return XLS_MAX_RESPONSE_BYTES;
  return format !== undefined && isStreamedFormat(format)
    ? STREAMED_MAX_RESPONSE_BYTES
    : DEFAULT_MAX_RESPONSE_BYTES;
}

const DOT_PATH = /^$|^[^.\s]+(\.[^.\s]+)*$/;

/** Field paths are dot paths unless the records are flat rows of a CSV or a workbook (docs/feeds.md). */
function checkFieldPaths(
  def: {
    format?: z.output<typeof formatSchema> | undefined;
    fields?: Record<string, unknown> | undefined;
    attributes?: Record<string, unknown> | undefined;
  },
  ctx: z.RefinementCtx,
): void {
  if (def.format !== undefined && isFlatFormat(def.format)) return;
  const check = (spec: unknown, at: (string | number)[]) => {
    if (typeof spec === "string") {
      if (!DOT_PATH.test(spec))
        ctx.addIssue({
          code: "custom",
          path: at,
          message: "must be a dot path like data.items (no empty segments)",
        });
      return;
    }
    if (spec === null || typeof spec !== "object") return;
    const o = spec as { path?: unknown; else?: unknown };
    if (typeof o.path === "string" && !DOT_PATH.test(o.path)) {
      ctx.addIssue({
        code: "custom",
        path: [...at, "path"],
        message: "must be a dot path like data.items (no empty segments)",
      });
    }
    if (o.else !== undefined) check(o.else, [...at, "else"]);
  };
  for (const [k, v] of Object.entries(def.fields ?? {})) check(v, ["fields", k]);
  for (const [k, v] of Object.entries(def.attributes ?? {})) check(v, ["attributes", k]);
}

/** A streamed format or an export job is one file: no pagination, partitions or SKU lists (docs/feeds.md, including Export jobs). */
function checkFeedCombinations(
  def: {
    format?: z.output<typeof formatSchema> | undefined;
    export?: unknown;
    pagination: { type: string };
    partitions?: unknown;
    skus?: unknown;
  },
  ctx: z.RefinementCtx,
): void {
  const streamed = def.format !== undefined && isStreamedFormat(def.format);
  const why = streamed
    ? `a streamed format (format.type ${def.format?.type}${def.format?.type === "json" ? " with stream" : ""}) is one file`
    : def.export !== undefined
      ? "an export job downloads one file"
      : undefined;
  if (why === undefined) return;
  if (def.pagination.type !== "none") {
    ctx.addIssue({
      code: "custom",
      path: ["pagination"],
      message: `${why}: it cannot be combined with pagination`,
    });
  }
  if (def.partitions !== undefined) {
    ctx.addIssue({
      code: "custom",
      path: ["partitions"],
      message: `${why}: it cannot be combined with partitions`,
    });
  }
  if (def.skus !== undefined) {
    ctx.addIssue({ code: "custom", path: ["skus"], message: `${why}: it cannot be combined with skus` });
  }
}

/**
 * Placeholders the walk defines. Partitions (`{partition}`), SKU lists
 * (`{skus}`, `{sku}`) and export jobs (`{job}`) define them; a definition
 * without those defines none, so any placeholder in it is an error.
 */
export function definedPlaceholders(def: {
  partitions?: unknown;
  skus?: { batch: number } | undefined;
}): ReadonlySet<string> {
  const names = new Set<string>();
  if (def.partitions !== undefined) names.add("partition");
  if (def.skus !== undefined) {
    names.add("skus");
    names.add("sku_list");
    if (def.skus.batch === 1) names.add("sku");
  }
  return names;
}

/** Placeholders of an enrichment request: its own batch of SKUs, and the walk's partition. */
function enrichPlaceholders(def: { partitions?: unknown }, batch: number): ReadonlySet<string> {
  const names = new Set<string>(["skus", "sku_list"]);
  if (batch === 1) names.add("sku");
  if (def.partitions !== undefined) names.add("partition");
  return names;
}

interface RequestShape {
  path: string;
  query: Record<string, string>;
  body?: unknown;
  form?: Record<string, string> | undefined;
}

function checkPlaceholders(
  def: {
    request: RequestShape;
    auth: AuthShape;
    partitions?: { values: string[] } | { request: RequestShape } | undefined;
    skus?: { batch: number } | undefined;
    enrich?: { request: RequestShape; batch: number }[] | undefined;
    export?: { create: RequestShape; poll: RequestShape } | undefined;
  },
  ctx: z.RefinementCtx,
): void {
  checkRequestPlaceholders(def.request, ["request"], definedPlaceholders(def), ctx);
  if (def.partitions !== undefined && "request" in def.partitions) {
    // The partition list is fetched before any partition exists: it defines no placeholder.
    checkRequestPlaceholders(def.partitions.request, ["partitions", "request"], new Set(), ctx);
  }
  for (const [i, e] of (def.enrich ?? []).entries()) {
    checkRequestPlaceholders(e.request, ["enrich", i, "request"], enrichPlaceholders(def, e.batch), ctx);
  }
  if (def.export !== undefined) {
    // The job is created before it has an id; every poll knows it.
    checkRequestPlaceholders(def.export.create, ["export", "create"], new Set(), ctx);
    checkRequestPlaceholders(def.export.poll, ["export", "poll"], new Set(["job"]), ctx);
  }
  checkLoginPlaceholders(def, ctx);
}

function checkRequestPlaceholders(
  r: RequestShape,
  at: (string | number)[],
  defined: ReadonlySet<string>,
  ctx: z.RefinementCtx,
): void {
  const check = (text: string, path: (string | number)[]) => {
    const dated = path[path.length - 1] === "path" || path[path.length - 2] === "query";
    for (const pattern of datePatternsIn(text)) {
      const problem = dated
        ? datePatternProblem(pattern)
        : "placeholder {date:…} is only filled in a request's path and query";
      if (problem !== undefined) ctx.addIssue({ code: "custom", path, message: problem });
    }
    for (const name of placeholdersIn(text)) {
      if (name === "sku_list" && defined.has(name) && !(path[at.length] === "body" && text === SKU_LIST)) {
        ctx.addIssue({
          code: "custom",
          path,
          message: `placeholder {sku_list} is only a whole string of a JSON body ("items": "{sku_list}"), replaced by the batch as an array`,
        });
      } else if (!defined.has(name)) {
        const known = (KNOWN_PLACEHOLDERS as readonly string[]).includes(name);
        ctx.addIssue({
          code: "custom",
          path,
          message: known
            ? name === "sku" && defined.has("skus")
              ? "placeholder {sku} needs batch 1; a batch of several SKUs is {skus}"
              : `placeholder {${name}} is not defined by this walk (it needs ${name === "partition" ? "partitions" : name === "job" ? "export" : "skus"})`
            : `unknown placeholder {${name}} (known: ${KNOWN_PLACEHOLDERS.map((k) => `{${k}}`).join(", ")})`,
        });
      }
    }
  };
  check(r.path, [...at, "path"]);
  for (const [k, v] of Object.entries(r.query)) check(v, [...at, "query", k]);
  for (const [text, where] of stringsIn(r.body, [...at, "body"])) check(text, where);
  for (const [k, v] of Object.entries(r.form ?? {})) check(v, [...at, "form", k]);
}

function checkLoginPlaceholders(def: { auth: AuthShape }, ctx: z.RefinementCtx): void {
  if (def.auth.type === "session") {
    // A login belongs to no partition, batch or job: it defines no placeholder.
    const login = def.auth.login;
    const none = new Set<string>();
    const checkLogin = (text: unknown, path: (string | number)[], defined = none) => {
      if (typeof text !== "string") return;
      for (const name of placeholdersIn(text)) {
        if (!defined.has(name))
          ctx.addIssue({
            code: "custom",
            path,
            message:
              path[2] === "path"
                ? `placeholder {${name}} is not defined in a login request (a login path takes only auth.login.pathParams)`
                : `placeholder {${name}} is not defined in a login request`,
          });
      }
    };
    // Only the path takes placeholders, and only those of pathParams.
    const params = new Set(Object.keys(login.pathParams ?? {}));
    checkLogin(login.path, ["auth", "login", "path"], params);
    const used = new Set(placeholdersIn(login.path));
    for (const name of params) {
      if (!used.has(name))
        ctx.addIssue({
          code: "custom",
          path: ["auth", "login", "pathParams", name],
          message: `is not used in auth.login.path (write {${name}} there)`,
        });
    }
    for (const [k, v] of Object.entries(login.query)) checkLogin(v, ["auth", "login", "query", k]);
    for (const [text, at] of stringsIn(login.body, ["auth", "login", "body"])) checkLogin(text, at);
    for (const [k, v] of Object.entries(login.form ?? {})) checkLogin(v, ["auth", "login", "form", k]);
  }
}

type AuthShape = z.output<typeof authSchema>;

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
export type RequestDefinition = ConnectorDefinition["request"];
export type SessionAuthDefinition = Extract<AuthDefinition, { type: "session" }>;
export type OAuth2AuthDefinition = Extract<AuthDefinition, { type: "oauth2" }>;
export type LoginDefinition = SessionAuthDefinition["login"];
export type ConditionDefinition = z.output<typeof conditionSchema>;
export type ErrorRuleDefinition = ConnectorDefinition["errors"][number];
export type AttributesDefinition = NonNullable<ConnectorDefinition["attributes"]>;
export type FieldSpec = NonNullable<FieldsDefinition["price"]>;
export type NullWhenDefinition = z.output<typeof nullWhen>;
export type PartitionsDefinition = NonNullable<ConnectorDefinition["partitions"]>;
export type SkusDefinition = NonNullable<ConnectorDefinition["skus"]>;
export type EnrichDefinition = NonNullable<ConnectorDefinition["enrich"]>[number];
export type ExportDefinition = NonNullable<ConnectorDefinition["export"]>;
export type GuardsDefinition = ConnectorDefinition["guards"];
