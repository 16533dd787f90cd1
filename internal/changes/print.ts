import type { Writable } from "node:stream";
import type pg from "pg";
import { formatCursor, parseCursor, streamChanges } from "./feed.js";

/** `supplier-sync changes` (docs/changes.md): the options as the command line parsed them. */
export interface ChangesCommand {
  since: string;
  supplier: string | undefined;
  limit: number;
  json: boolean;
}

const HEADER = "cursor\tkind\tsupplier\tsku\tprice\tcurrency\tstock\tobserved_at\n";

/**
 * Prints the changes after `--since` on `out` (one line each; `--json`: one object per
 * line, nothing else) and, on `err`, the cursor to continue from and the count. Exit 0,
 * also when there is nothing new (the cursor printed is then `--since` itself).
 */
export async function printChanges(
  pool: pg.Pool,
  command: ChangesCommand,
  out: Writable = process.stdout,
  err: Writable = process.stderr,
): Promise<number> {
  const since = parseCursor(command.since);
  const client = await pool.connect();
  try {
    if (!command.json) out.write(HEADER);
    const { count, cursor } = await streamChanges(
      client,
      { since, supplier: command.supplier, limit: command.limit },
      out,
      { json: command.json },
    );
    err.write(`cursor: ${formatCursor(cursor)} (${count} change${count === 1 ? "" : "s"})\n`);
    return 0;
  } finally {
    client.release();
  }
}
