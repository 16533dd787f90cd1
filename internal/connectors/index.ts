import type { Connector } from "../ingestion/ports.js";
import { type Clock, systemClock } from "../platform/clock.js";
import { ConfigError } from "../platform/errors.js";
import { connectorModuleLib } from "./modules/module-lib.js";
import { type ConnectorModule, findConnectorModule } from "./modules/registry.js";
import { Transport, type TransportOptions } from "./transport/transport.js";
import { createDeclarativeConnector, type DeclarativeOptions } from "./walk/declarative.js";

/**
 * Connectors: the declarative connector and the registry of hand-written ones, over one
 * shared transport per supplier. Layers, each importing only those listed after it:
 *
 * - `index.ts`, `load.ts`: creating a supplier's connector; loading and checking its
 *   connector file (a bad file is an error for that supplier only).
 * - `modules/`: hand-written connectors (`"module": "json-lines"`, `./<file>.mjs`
 *   files), the registry and the helpers a module gets (`module-lib.ts`).
 * - `walk/`: the shapes of a walk: pages, partitions, SKU lists, enrichment, export
 *   jobs, dated files, feeds, and the request templates they send.
 * - `transport/`: one supplier's HTTP: the client (undici pools, origin pinning,
 *   redirects, decompression, size limits), rate limiter, retries, auth, the
 *   connector's error rules (`error-rules.ts`) and conditional requests (ETag / 304).
 * - `records/`: from a response's records to offers and rejects: field specs,
 *   validation, coverage, exact decimal sums.
 * - `schema/`: the connector file itself: its definition schema, placeholders, JSON
 *   text and issue formatting, and the credentials check (each secret slot's lookup).
 *
 * `transport/` and `records/` do not import each other; nothing under here imports
 * `internal/config` except `load.ts` (the connectors folder and the supplier names),
 * and `internal/feeds` imports nothing from here.
 */

/**
 * What a supplier's connector is built from: the transport's options (the definition,
 * secrets, logger, metrics; a clock and jitter source, the system's by default), the
 * walk's (`DeclarativeOptions`: SKU database, spool folder, time zone) and a module
 * file's export. The transport gets its part as one object, not copied field by field.
 */
export interface CreateConnectorOptions
  extends Omit<TransportOptions, "clock" | "random">,
    DeclarativeOptions {
  /** Time source of the rate limiter, backoff and deadlines; the system clock by default. */
  clock?: Clock;
  /** Jitter source in [0, 1); `Math.random` by default. */
  random?: () => number;
  /**
   * The default export of the definition's `"module": "./<file>.mjs"`, imported by
   * `loadConnector` (connectors/modules/module-file.ts); required for such a definition.
   */
  module?: ConnectorModule | undefined;
}

/**
 * Builds a supplier's connector. Long-lived: one per supplier for the
 * process's lifetime, so its connection pools and rate limiter persist across
 * walks; `walk(ctx)` per run; `close()` releases sockets and is idempotent.
 * @throws ConfigError for an unknown `module` or invalid module settings.
 */
export function createConnector(options: CreateConnectorOptions): Connector {
  // The transport (which a hand-written module gets) keeps its own options only: not the
  // SKU database, the spool folder or the module.
  const { database, spoolDir, timeZone, module, clock, random, ...transportOptions } = options;
  const transport = new Transport({
    ...transportOptions,
    clock: clock ?? systemClock,
    random: random ?? Math.random,
  });
  const moduleName = options.definition.module;
  if (moduleName !== undefined) {
    // docs/connector-modules.md: a module file gets the same transport and settings as a registered module.
    const factory = moduleName.startsWith("./") ? module : findConnectorModule(moduleName);
    if (factory === undefined) {
      throw new ConfigError(
        `module: ${JSON.stringify(moduleName)} was not loaded (loadConnector imports it)`,
      );
    }
    const lib = connectorModuleLib(options.definition);
    return checkedConnector(moduleName, factory(transport, options.definition.settings ?? {}, lib));
  }
  return createDeclarativeConnector(transport, { database, spoolDir, timeZone });
}

/** A module's connector, checked to have the `Connector` contract's methods. */
function checkedConnector(moduleName: string, connector: unknown): Connector {
  const c = connector as Partial<Connector> | null | undefined;
  if (typeof c?.walk !== "function" || typeof c.close !== "function") {
    throw new ConfigError(
      `module: ${JSON.stringify(moduleName)} returned no connector (an object with walk(ctx) and close())`,
    );
  }
  return c as Connector;
}

export { readDotPath } from "../platform/dot-path.js";
export type { ConnectorModuleLib } from "./modules/module-lib.js";
export type { ConnectorModule } from "./modules/registry.js";
export { connectorModuleNames } from "./modules/registry.js";
export { normalizeRecord, normalizeRecords } from "./records/normalize.js";
export type { RequestEvent } from "./transport/http-client.js";
export type { PageFetch } from "./transport/transport.js";
export { Transport } from "./transport/transport.js";
export { createDeclarativeConnector } from "./walk/declarative.js";
export type { SkuDatabase } from "./walk/sku-list.js";
