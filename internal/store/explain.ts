/**
 * Reading `EXPLAIN (FORMAT JSON)` plans: which relations a statement scans and how.
 * Used by the console's plan test and `bench/console.ts` to hold each page to
 * indexed access.
 */
import type { Queryable } from "./queryable.js";

/** One node of a JSON plan, as much of it as is read here. */
export interface PlanNode {
  "Node Type": string;
  "Relation Name"?: string;
  "Index Name"?: string;
  Plans?: PlanNode[];
  [key: string]: unknown;
}

/** A node that reads a relation. */
export interface Scan {
  node: string;
  relation: string;
  index: string | undefined;
}

/** Every node of `plan` that reads a table, depth first. */
export function scansOf(plan: PlanNode): Scan[] {
  const out: Scan[] = [];
  const walk = (n: PlanNode) => {
    if (n["Relation Name"] !== undefined) {
      // A bitmap heap scan reads the heap pages its Bitmap Index Scan children found.
      const bitmapIndexes = (n.Plans ?? []).flatMap(function indexesOf(c): string[] {
        if (c["Node Type"] === "Bitmap Index Scan" && c["Index Name"]) return [c["Index Name"]];
        return c["Node Type"].startsWith("Bitmap") ? (c.Plans ?? []).flatMap(indexesOf) : [];
      });
      const index =
        n["Node Type"] === "Bitmap Heap Scan" ? bitmapIndexes.join(",") || undefined : n["Index Name"];
      out.push({ node: n["Node Type"], relation: n["Relation Name"], index });
    }
    for (const child of n.Plans ?? []) walk(child);
  };
  walk(plan);
  return out;
}

/** `EXPLAIN (FORMAT JSON[, ANALYZE, BUFFERS])` of `sql` with `params`; the root plan node and the whole JSON. */
export async function explainJson(
  db: Queryable,
  sql: string,
  params: unknown[],
  options: { analyze?: boolean } = {},
): Promise<{ plan: PlanNode; json: Record<string, unknown> }> {
  const flags = options.analyze ? "analyze, buffers, format json" : "format json";
  const { rows } = await db.query<{ "QUERY PLAN": [Record<string, unknown>] }>(
    `explain (${flags}) ${sql}`,
    params,
  );
  const json = rows[0]?.["QUERY PLAN"][0];
  if (!json) throw new Error("EXPLAIN returned no plan");
  return { plan: json["Plan"] as PlanNode, json };
}

/** `EXPLAIN` in text form, for people. */
export async function explainText(
  db: Queryable,
  sql: string,
  params: unknown[],
  analyze = false,
): Promise<string> {
  const { rows } = await db.query<{ "QUERY PLAN": string }>(
    `explain (${analyze ? "analyze, buffers, " : ""}costs off) ${sql}`,
    params,
  );
  return rows.map((r) => r["QUERY PLAN"]).join("\n");
}
