import type { FieldCoverage, Offer, Reject } from "../../ingestion/ports.js";
import { readDotPath } from "../../platform/dot-path.js";
import { ConfigError, IngestionError } from "../../platform/errors.js";
import { decodeJsonPage } from "../../platform/json-body.js";
import { type CompiledFields, compileFields } from "../records/field-spec.js";
import { normalizeRecords } from "../records/normalize.js";
import { type ConnectorDefinition, fieldsSchema } from "../schema/connector-schema.js";
import { formatSchemaIssues } from "../schema/json-text.js";
import type { HttpResponse } from "../transport/http-client.js";

/**
 * What a hand-written connector module gets besides its transport and settings
 * (docs/connector-modules.md): the declarative connector's own JSON decoding and record
 * validation, so a module in the connectors folder (which cannot import this
 * package's internals) produces offers by the same rules — exact prices, the same
 * reject reasons, the same limits — and fails with the same error classes.
 */
export interface ConnectorModuleLib {
  /**
   * The records at `recordsPath` (dot path; `""` for a top-level array) of a JSON
   * response, parsed with `maxJsonDepth` / `maxRecordsPerPage` and without losing a
   * digit of any number. Throws `IngestionError('CONTRACT')` for anything else.
   */
  jsonRecords(response: HttpResponse, recordsPath: string): unknown[];
  /**
   * Raw records → offers and rejects, by a field mapping of the connector file's
   * `fields` shape (dot paths or field specs), validated and compiled once per
   * mapping object, and the step's field coverage (docs/connectors.md, Field coverage):
   * put it on the page as `coverage`. Never throws for a bad record; a bad mapping is a
   * `ConfigError`.
   */
  normalizeRecords(
    records: readonly unknown[],
    fields: NonNullable<ConnectorDefinition["fields"]>,
  ): { offers: Offer[]; rejects: Reject[]; coverage: FieldCoverage[] };
  /** Reads a dot path (`"price.value"`, `"items.0.id"`) of a parsed value; undefined when absent. */
  readDotPath(value: unknown, path: string): unknown;
  /** Throw for a failed step: `new IngestionError("CONTRACT" | "SUPPLIER" | …, message)`. */
  IngestionError: typeof IngestionError;
  /** Throw from the module's factory for bad `settings`; the connector is then invalid. */
  ConfigError: typeof ConfigError;
}

/** The lib of one connector, bound to its definition's limits. */
export function connectorModuleLib(def: ConnectorDefinition): ConnectorModuleLib {
  const compiled = new WeakMap<object, CompiledFields>();
  const compile = (fields: object): CompiledFields => {
    let mapping = compiled.get(fields);
    if (!mapping) {
      const parsed = fieldsSchema.safeParse(fields);
      if (!parsed.success) throw new ConfigError(`fields: ${formatSchemaIssues(parsed.error.issues)}`);
      mapping = compileFields(parsed.data);
      compiled.set(fields, mapping);
    }
    return mapping;
  };
  return {
    jsonRecords: (response, recordsPath) =>
      decodeJsonPage(response.body, response.contentType, {
        maxDepth: def.maxJsonDepth,
        maxRecords: def.maxRecordsPerPage,
        recordsPath,
      }).records,
    normalizeRecords: (records, fields) => normalizeRecords(records, compile(fields)),
    readDotPath,
    IngestionError,
    ConfigError,
  };
}
