/**
 * Helpers for the connector tests: definitions with defaults applied, a
 * logger whose output the test reads, and a walk collector.
 */

import { readFileSync } from "node:fs";
import { createServer, type IncomingMessage, type Server, type ServerResponse } from "node:http";
import type { AddressInfo } from "node:net";
import { Writable } from "node:stream";
import type pg from "pg";
import type { Connector, Page, WalkContext } from "../ingestion/ports.js";
import { createMetrics, type Metrics } from "../observability/metrics.js";
import { createLogger, type Logger } from "../platform/logger.js";
import { SecretRegistry } from "../platform/redact.js";
import { type CreateConnectorOptions, createConnector } from "./index.js";
import { type ConnectorDefinition, connectorDefinitionSchema } from "./schema/connector-schema.js";

export const SIM_FIELDS = {
  sku: "article",
  name: "title",
  price: "price.value",
  currency: "price.currency",
  stock: "stock.total",
};

/** A validated definition for the simulator's `/v1/offers`, fast retries, generous rate limit. */
export function simDefinition(baseUrl: string, extra: Record<string, unknown> = {}): ConnectorDefinition {
  return connectorDefinitionSchema.parse({
    baseUrl,
    request: { path: "/v1/offers" },
    pagination: { type: "page", param: "page", start: 1 },
    records: { path: "data.items" },
    fields: SIM_FIELDS,
    rateLimit: { requestsPerSecond: 1000, burst: 1000, maxConcurrency: 2 },
    retry: { maxAttempts: 3, baseDelayMs: 5, maxDelayMs: 20, maxRetryAfterMs: 5000 },
    ...extra,
  });
}

/** A logger writing JSON lines into `lines`, scrubbing the secrets of `secrets`. */
export function captureLogger(secrets: SecretRegistry = new SecretRegistry()): {
  log: Logger;
  lines: string[];
  secrets: SecretRegistry;
} {
  const lines: string[] = [];
  const sink = new Writable({
    write(chunk, _enc, done) {
      lines.push(...String(chunk).split("\n").filter(Boolean));
      done();
    },
  });
  return { log: createLogger({ level: "trace", secrets, destination: sink }), lines, secrets };
}

export interface TestConnector {
  connector: Connector;
  metrics: Metrics;
  lines: string[];
  log: Logger;
  /** The registry shared by the connector and `log`. */
  secrets: SecretRegistry;
}

/**
 * Builds a connector with a captured logger, fresh metrics and a fresh secret registry
 * (shared by both, as in the app); closed when the test ends.
 */
export function buildConnector(
  t: { teardown(fn: () => unknown): void },
  definition: ConnectorDefinition,
  overrides: Partial<CreateConnectorOptions> = {},
): TestConnector {
  const { log, lines, secrets } = captureLogger(overrides.secrets);
  const metrics = createMetrics({ processMetrics: false });
  const connector = createConnector({
    supplier: "acme",
    definition,
    connectorsDir: "/nonexistent",
    readSecretEnv: () => undefined,
    log,
    metrics,
    ...overrides,
    secrets,
  });
  t.teardown(() => connector.close());
  return { connector, metrics, lines, log, secrets };
}

export function walkContext(log: Logger, signal: AbortSignal = new AbortController().signal): WalkContext {
  return { signal, log, runId: "42" };
}

/** Walks to the end, returning every page. */
export async function collectPages(connector: Connector, ctx: WalkContext): Promise<Page[]> {
  const pages: Page[] = [];
  for await (const page of connector.walk(ctx)) pages.push(page);
  return pages;
}

/** Walks and returns the error it fails with (fails the test if it does not). */
export async function walkError(connector: Connector, ctx: WalkContext): Promise<unknown> {
  try {
    await collectPages(connector, ctx);
  } catch (err) {
    return err;
  }
  throw new Error("walk was expected to fail but completed");
}

/** Polls `check` every 5 ms until it holds; fails, naming `what`, after `timeoutMs`. */
export async function waitFor(check: () => boolean, what: string, timeoutMs = 5_000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!check()) {
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 5));
  }
}

/** A loopback server with a handler; records every request it receives. */
export async function startServer(
  t: { teardown(fn: () => unknown): void },
  handler: (req: IncomingMessage, res: ServerResponse) => void,
): Promise<{ server: Server; url: string; port: number; requests: IncomingMessage[] }> {
  const requests: IncomingMessage[] = [];
  const server = createServer((req, res) => {
    requests.push(req);
    handler(req, res);
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  const port = (server.address() as AddressInfo).port;
  t.teardown(
    () =>
      new Promise<void>((resolve) => {
        server.closeAllConnections();
        server.close(() => resolve());
      }),
  );
  return { server, url: `http://127.0.0.1:${port}`, port, requests };
}

/** A connector file shipped in config/suppliers, parsed as JSON (not validated: tests override keys first). */
export function shippedConnector(name: string): Record<string, unknown> {
  return JSON.parse(
    readFileSync(new URL(`../../config/suppliers/${name}.json`, import.meta.url), "utf8"),
  ) as Record<string, unknown>;
}

/** One stored offer, as the end-to-end tests of shipped connectors compare it. */
export interface StoredOffer {
  sku: string;
  name: string | null;
  price: string | null;
  currency: string | null;
  stock: number | null;
  attributes: Record<string, unknown> | null;
  delisted: boolean;
}

/** A supplier's offers in `supplier_offers`, by SKU, the price as its exact text. */
export async function storedOffers(pool: pg.Pool, supplier: string): Promise<StoredOffer[]> {
  const { rows } = await pool.query<StoredOffer>(
    `select sku, name, price::text as price, currency, stock, attributes, delisted_at is not null as delisted
       from supplier_offers where supplier = $1 order by sku`,
    [supplier],
  );
  return rows;
}
