import { readFileSync } from "node:fs";
import { join } from "node:path";
import { SUPPLIER_NAME } from "../config/suppliers.js";
import type { Config } from "../config/types.js";
import { errorMessage } from "../platform/errors.js";
import type { SecretRegistry } from "../platform/redact.js";
import { isModuleFile, loadModuleFile } from "./modules/module-file.js";
import type { ConnectorModule } from "./modules/registry.js";
import type { ConnectorDefinition } from "./schema/connector-schema.js";
import { connectorDefinitionSchema } from "./schema/connector-schema.js";
import { checkAuthSecrets } from "./schema/credentials.js";
import { describeJsonError, formatSchemaIssues } from "./schema/json-text.js";

/**
 * Connector definition files `<connectorsDir>/<name>.json` → {@link ConnectorStatus}.
 *
 * Invariant (docs/architecture.md, The invariants (5)): nothing here throws for a bad file. Each supplier
 * gets its own status, so one missing or broken connector is an error for that
 * supplier only and never stops the others from loading.
 */

/** What `loadConnectors` found for one supplier. A bad connector is an error for that supplier only. */
export type ConnectorStatus =
  | {
      status: "ok";
      definition: ConnectorDefinition;
      path: string;
      /** The default export of a `"module": "./<file>.mjs"` (docs/connector-modules.md), imported by `loadConnector`. */
      module?: ConnectorModule;
    }
  | { status: "missing"; path: string }
  | { status: "invalid"; path: string; reason: string };

/** Connector files are a few kilobytes; a huge one is a mistake, not a config. */
const MAX_CONNECTOR_FILE_BYTES = 1024 * 1024;

function invalid(path: string, reason: string): ConnectorStatus {
  return { status: "invalid", path, reason };
}

/**
 * Loads and validates the connector of one supplier, including a check that the
 * secrets it names can be resolved right now (they are registered in `secrets`), and
 * imports its `"module": "./<file>.mjs"` if it names one (docs/connector-modules.md: only from inside
 * the connectors folder; a failing import or a missing default export makes the connector
 * invalid). The reason of an invalid one is log-safe (scrubbed with `secrets`, cut).
 */
export async function loadConnector(
  config: Config,
  name: string,
  secrets: SecretRegistry,
): Promise<ConnectorStatus> {
  const status = await readConnector(config, name, secrets);
  return status.status === "invalid" ? { ...status, reason: secrets.safeText(status.reason, 1_000) } : status;
}

async function readConnector(
  config: Config,
  name: string,
  secrets: SecretRegistry,
): Promise<ConnectorStatus> {
  // The name becomes a file name: never let anything but a valid supplier name reach the file system.
  if (!SUPPLIER_NAME.test(name)) {
    return invalid(config.connectorsDir, `supplier name ${JSON.stringify(name)} is not valid`);
  }
  const path = join(config.connectorsDir, `${name}.json`);
  let text: string;
  try {
    const bytes = readFileSync(path);
    if (bytes.length > MAX_CONNECTOR_FILE_BYTES) {
      return invalid(path, `file is larger than ${MAX_CONNECTOR_FILE_BYTES} bytes`);
    }
    text = bytes.toString("utf8");
  } catch (err) {
    if ((err as { code?: unknown }).code === "ENOENT") return { status: "missing", path };
    return invalid(path, `cannot be read: ${errorMessage(err)}`);
  }
  let json: unknown;
  try {
    json = JSON.parse(text);
  } catch (err) {
    return invalid(path, describeJsonError(text, errorMessage(err)));
  }
  const parsed = connectorDefinitionSchema.safeParse(json);
  if (!parsed.success) return invalid(path, formatSchemaIssues(parsed.error.issues, json));
  try {
    checkAuthSecrets(parsed.data.auth, {
      connectorsDir: config.connectorsDir,
      readSecretEnv: config.readSecretEnv,
      secrets,
    });
  } catch (err) {
    return invalid(path, errorMessage(err));
  }
  const module = parsed.data.module;
  if (module !== undefined && isModuleFile(module)) {
    try {
      return {
        status: "ok",
        definition: parsed.data,
        path,
        module: await loadModuleFile(config.connectorsDir, module),
      };
    } catch (err) {
      return invalid(path, errorMessage(err));
    }
  }
  return { status: "ok", definition: parsed.data, path };
}

/** {@link loadConnector} for each supplier name, in order. */
export async function loadConnectors(
  config: Config,
  supplierNames: string[],
  secrets: SecretRegistry,
): Promise<Map<string, ConnectorStatus>> {
  const statuses = new Map<string, ConnectorStatus>();
  for (const name of supplierNames) statuses.set(name, await loadConnector(config, name, secrets));
  return statuses;
}
