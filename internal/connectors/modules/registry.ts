import type { Connector } from "../../ingestion/ports.js";
import { ConfigError } from "../../platform/errors.js";
import type { Transport } from "../transport/transport.js";
import { createJsonLinesConnector } from "./json-lines.js";
import type { ConnectorModuleLib } from "./module-lib.js";

/**
 * Hand-written connectors, selected by `"module": "<name>"` in a connector
 * file. A module receives the supplier's {@link Transport} (rate limiter,
 * retries, metrics, origin pinning, credentials) and its raw `settings`,
 * which it validates itself (throwing `ConfigError`), and a {@link ConnectorModuleLib}
 * of decoding and validation helpers. It implements the same
 * `Connector` contract as the declarative connector.
 */
export type ConnectorModule = (
  transport: Transport,
  settings: Record<string, unknown>,
  /** Decoding and validation helpers for modules that cannot import this package (module-lib.ts). */
  lib: ConnectorModuleLib,
) => Connector;

const MODULES: ReadonlyMap<string, ConnectorModule> = new Map<string, ConnectorModule>([
  ["json-lines", createJsonLinesConnector],
]);

/** Names of the registered modules. */
export function connectorModuleNames(): string[] {
  return [...MODULES.keys()];
}

/** @throws ConfigError for an unknown module name. */
export function findConnectorModule(name: string): ConnectorModule {
  const module = MODULES.get(name);
  if (!module) {
    throw new ConfigError(
      `module ${JSON.stringify(name)} is not a known connector module (known: ${connectorModuleNames().join(", ")})`,
    );
  }
  return module;
}
