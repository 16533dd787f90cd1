import type { IncomingMessage, ServerResponse } from "node:http";
import { z } from "zod";
import { sendJson } from "./respond.js";
import type {
  SimulatorFaults,
  SimulatorMutation,
  SimulatorStats,
  SimulatorSupplierOptions,
} from "./types.js";

/**
 * The admin HTTP API (JSON), so a simulator running as its own process (demo,
 * docker-compose, chaos suite) can be driven like the programmatic one.
 */

const pageNumber = z.number().int().min(1);

export const faultsSchema = z.strictObject({
  status: z
    .strictObject({
      code: z.number().int().min(100).max(599),
      rate: z.number().min(0).max(1).optional(),
      onPage: pageNumber.optional(),
      times: z.number().int().min(0).optional(),
    })
    .optional(),
  retryAfter: z
    .strictObject({
      seconds: z.number().min(0).optional(),
      httpDate: z.boolean().optional(),
      times: z.number().int().min(0).optional(),
      onPage: pageNumber.optional(),
    })
    .optional(),
  latencyMs: z.number().min(0).optional(),
  hangOnPage: pageNumber.optional(),
  truncateOnPage: pageNumber.optional(),
  invalidJsonOnPage: pageNumber.optional(),
  missingRecordsPathOnPage: pageNumber.optional(),
  contentType: z.string().min(1).optional(),
  oversizedBodyBytes: z.number().int().min(0).optional(),
  resetOnPage: pageNumber.optional(),
  redirectTo: z.string().min(1).optional(),
  linkTo: z.string().min(1).optional(),
  cursorValue: z.string().optional(),
  bodyError: z
    .strictObject({
      code: z.number().int(),
      message: z.string().optional(),
      onPage: pageNumber.optional(),
      times: z.number().int().min(0).optional(),
    })
    .optional(),
  bombOnPage: pageNumber.optional(),
}) satisfies z.ZodType<SimulatorFaults>;

const authSchema = z.discriminatedUnion("type", [
  z.strictObject({ type: z.literal("none") }),
  z.strictObject({ type: z.literal("bearer"), token: z.string() }),
  z.strictObject({ type: z.literal("header"), name: z.string().min(1), value: z.string() }),
  z.strictObject({ type: z.literal("basic"), username: z.string(), password: z.string() }),
  z.strictObject({ type: z.literal("query"), param: z.string().min(1), value: z.string() }),
  z.strictObject({
    type: z.literal("session"),
    loginPath: z.string().startsWith("/"),
    loginMethod: z.enum(["GET", "POST"]).optional(),
    credentialsIn: z.enum(["query", "form", "json"]).optional(),
    credentials: z.record(z.string(), z.string()),
    tokenIn: z
      .union([
        z.strictObject({ body: z.string().min(1) }),
        z.strictObject({ header: z.string().min(1) }),
        z.strictObject({ cookie: z.string().min(1) }),
      ])
      .optional(),
    sendAs: z
      .union([
        z.strictObject({ query: z.string().min(1) }),
        z.strictObject({ header: z.string().min(1), prefix: z.string().optional() }),
        z.strictObject({ cookie: z.string().min(1) }),
      ])
      .optional(),
    expireAfterRequests: z.number().int().min(0).optional(),
    expireAfterMs: z.number().int().min(0).optional(),
    expiredAs: z.enum(["401", "body403"]).optional(),
    minLoginIntervalMs: z.number().int().min(0).optional(),
    failLogins: z
      .strictObject({ status: z.number().int().min(100).max(599), times: z.number().int().min(0) })
      .optional(),
  }),
  z.strictObject({
    type: z.literal("oauth2"),
    tokenPath: z.string().startsWith("/"),
    clientId: z.string(),
    clientSecret: z.string(),
    expiresInSeconds: z.number().int().min(1).optional(),
    expireAfterRequests: z.number().int().min(0).optional(),
  }),
]);

export const supplierOptionsSchema = z.strictObject({
  size: z.number().int().min(0),
  pageSize: z.number().int().min(1).optional(),
  pagination: z
    .enum([
      "page",
      "offset",
      "cursor",
      "link",
      "none",
      "stripe",
      "total-pages",
      "offset-total",
      "cursor-header",
    ])
    .optional(),
  auth: authSchema.optional(),
  rateLimit: z
    .strictObject({ requestsPerSecond: z.number().positive(), burst: z.number().min(1) })
    .optional(),
  invalidRate: z.number().min(0).max(1).optional(),
  renameField: z.strictObject({ from: z.string().min(1), to: z.string().min(1) }).optional(),
  priceFormat: z.enum(["string", "number"]).optional(),
  faults: faultsSchema.optional(),
  envelope: z.boolean().optional(),
  compression: z.enum(["gzip", "deflate", "deflate-raw", "br"]).optional(),
  method: z.enum(["GET", "POST"]).optional(),
  sizeParam: z.string().min(1).optional(),
  /** Also answer a real API's routes (profiles.ts): what `--config` files need for deploy/compose-simulator.json. */
  profile: z.enum(["etm", "iek", "systeme"]).optional(),
}) satisfies z.ZodType<SimulatorSupplierOptions>;

const mutationSchema = z.strictObject({
  changePrices: z.number().int().min(0).optional(),
  changeStock: z.number().int().min(0).optional(),
  remove: z.number().int().min(0).optional(),
  add: z.number().int().min(0).optional(),
  reset: z.boolean().optional(),
  setPrices: z.record(z.string(), z.string().regex(/^\d+(\.\d+)?([eE][+-]?\d+)?$/)).optional(),
  setCurrencies: z.record(z.string(), z.string().regex(/^[A-Z]{3}$/)).optional(),
}) satisfies z.ZodType<SimulatorMutation>;

/** What the admin API needs from the simulator. */
export interface AdminControl {
  configure(name: string, options: SimulatorSupplierOptions): void;
  mutate(name: string, m: SimulatorMutation): void;
  setFaults(name: string, faults: SimulatorFaults): void;
  stats(name: string): SimulatorStats;
  resetStats(name: string): void;
  has(name: string): boolean;
}

const MAX_ADMIN_BODY = 1024 * 1024;

async function readJson(req: IncomingMessage): Promise<unknown> {
  const chunks: Buffer[] = [];
  let size = 0;
  for await (const chunk of req) {
    size += (chunk as Buffer).length;
    if (size > MAX_ADMIN_BODY) throw new Error("body too large");
    chunks.push(chunk as Buffer);
  }
  const text = Buffer.concat(chunks).toString("utf8");
  return text.trim() === "" ? {} : JSON.parse(text);
}

const ROUTE = /^\/_admin\/suppliers\/([^/]+)(\/mutate|\/faults|\/stats|\/reset-stats)?$/;

export async function handleAdmin(
  req: IncomingMessage,
  res: ServerResponse,
  url: URL,
  control: AdminControl,
): Promise<void> {
  if (url.pathname === "/_admin/health") {
    sendJson(res, undefined, 200, { status: "ok" });
    return;
  }
  const match = ROUTE.exec(url.pathname);
  if (!match) {
    sendJson(res, undefined, 404, { error: "not found", path: url.pathname });
    return;
  }
  const name = decodeURIComponent(match[1]!);
  const action = `${req.method} ${match[2] ?? ""}`;
  let body: unknown;
  try {
    body = req.method === "GET" ? undefined : await readJson(req);
  } catch (err) {
    sendJson(res, undefined, 400, { error: `invalid JSON body: ${String(err)}` });
    return;
  }
  if (action !== "PUT " && !control.has(name)) {
    sendJson(res, undefined, 404, { error: `unknown supplier ${name}` });
    return;
  }
  const parse = <T>(schema: z.ZodType<T>): T | undefined => {
    const result = schema.safeParse(body);
    if (result.success) return result.data;
    sendJson(res, undefined, 400, { error: z.prettifyError(result.error) });
    return undefined;
  };
  switch (action) {
    case "PUT ": {
      const options = parse(supplierOptionsSchema);
      if (options) {
        control.configure(name, options);
        sendJson(res, undefined, 200, { ok: true });
      }
      return;
    }
    case "POST /mutate": {
      const m = parse(mutationSchema);
      if (m) {
        control.mutate(name, m);
        sendJson(res, undefined, 200, { ok: true });
      }
      return;
    }
    case "PUT /faults": {
      const faults = parse(faultsSchema);
      if (faults) {
        control.setFaults(name, faults);
        sendJson(res, undefined, 200, { ok: true });
      }
      return;
    }
    case "GET /stats":
      sendJson(res, undefined, 200, control.stats(name));
      return;
    case "POST /reset-stats":
      control.resetStats(name);
      sendJson(res, undefined, 200, { ok: true });
      return;
    default:
      sendJson(res, undefined, 405, { error: `method ${req.method} not allowed on ${url.pathname}` });
  }
}
