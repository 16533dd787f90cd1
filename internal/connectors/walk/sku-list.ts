import { readFile } from "node:fs/promises";
import { isAbsolute, resolve } from "node:path";
import { errorMessage, IngestionError } from "../../platform/errors.js";
import type { SkusDefinition } from "../schema/connector-schema.js";

/**
 * SKU lists (docs/connectors.md, SKU lists), read at the start of every run: a file of the
 * connectors folder (one SKU a line, blank lines and `#` comments ignored), or
 * the first column of a SQL query run in a read-only transaction with `$1` =
 * the supplier's name. Repeated SKUs are kept once, in first-seen order.
 */

/** One pooled connection, as much of `pg.PoolClient` as a SKU query needs. */
export interface SkuQueryClient {
  query(config: {
    text: string;
    values?: unknown[];
    rowMode: "array";
    queryMode?: "extended";
  }): Promise<{ rows: unknown[][] }>;
  query(text: string): Promise<unknown>;
  release(destroy?: boolean | Error): void;
}

/** Where `sql` SKU lists are read: satisfied by a `pg.Pool`. */
export interface SkuDatabase {
  connect(): Promise<SkuQueryClient>;
}

export interface SkuListSources {
  supplier: string;
  connectorsDir: string;
  /** Absent where no database is opened (`preview`): a `sql` list then fails with a clear error. */
  database: SkuDatabase | undefined;
  /** Bound of the SQL statement (`timeouts.requestMs`). */
  statementTimeoutMs: number;
}

/** The run's SKUs, deduplicated in first-seen order. @throws IngestionError `CONTRACT`. */
export async function readSkuList(skus: SkusDefinition, sources: SkuListSources): Promise<string[]> {
  const raw =
    skus.from === "file" ? await readSkuFile(skus.file, sources) : await querySkus(skus.query, sources);
  const list = [...new Set(raw)];
  if (skus.batch > 1) {
    // The supplier splits `{skus}` at the separator: such a SKU would be asked for as two.
    const clash = list.find((sku) => sku.includes(skus.separator));
    if (clash !== undefined) {
      throw new IngestionError(
        "CONTRACT",
        `SKU ${JSON.stringify(clash.slice(0, 100))} contains skus.separator ${JSON.stringify(skus.separator)}`,
      );
    }
  }
  if (list.length === 0 && !skus.allowEmpty) {
    throw new IngestionError(
      "CONTRACT",
      `SKU list is empty (skus.${skus.from === "file" ? `file ${JSON.stringify(skus.file)}` : "query"}); set skus.allowEmpty to accept that`,
    );
  }
  return list;
}

async function readSkuFile(file: string, sources: SkuListSources): Promise<string[]> {
  const path = isAbsolute(file) ? file : resolve(sources.connectorsDir, file);
  let text: string;
  try {
    text = await readFile(path, "utf8");
  } catch (err) {
    throw new IngestionError(
      "CONTRACT",
      `skus.file ${JSON.stringify(file)} cannot be read: ${errorMessage(err)}`,
      {
        cause: err,
      },
    );
  }
  const out: string[] = [];
  for (const line of text.split(/\r?\n/)) {
    const sku = line.trim();
    if (sku === "" || sku.startsWith("#")) continue;
    out.push(sku);
  }
  return out;
}

/** SQLSTATE 25006: read_only_sql_transaction. */
const READ_ONLY_VIOLATION = "25006";

async function querySkus(query: string, sources: SkuListSources): Promise<string[]> {
  const db = sources.database;
  if (db === undefined) {
    throw new IngestionError("CONTRACT", "skus.query needs the database, which this command does not open");
  }
  const client = await db.connect().catch((err: unknown) => {
    throw new IngestionError("DATABASE", `skus.query: cannot connect: ${errorMessage(err)}`, { cause: err });
  });
  let broken = false;
  try {
    await client.query("begin transaction isolation level repeatable read, read only");
    await client.query(
      `set local statement_timeout = ${Math.max(1, Math.floor(sources.statementTimeoutMs))}`,
    );
    // Extended protocol always: one statement only, so nothing can end the read-only transaction early.
    const values = /\$1(?!\d)/.test(query) ? [sources.supplier] : [];
    const result = await client.query({ text: query, values, rowMode: "array", queryMode: "extended" });
    await client.query("commit");
    const out: string[] = [];
    for (const row of result.rows) {
      const value = row[0];
      if (value === null || value === undefined) continue;
      const sku = String(value).trim();
      if (sku !== "") out.push(sku);
    }
    return out;
  } catch (err) {
    await client.query("rollback").catch(() => {
      broken = true;
    });
    const code = (err as { code?: unknown }).code;
    if (code === READ_ONLY_VIOLATION) {
      throw new IngestionError(
        "CONTRACT",
        `skus.query tried to write (it runs in a read-only transaction; nothing was written): ${errorMessage(err)}`,
        { cause: err },
      );
    }
    throw new IngestionError("CONTRACT", `skus.query failed: ${errorMessage(err)}`, { cause: err });
  } finally {
    client.release(broken);
  }
}
