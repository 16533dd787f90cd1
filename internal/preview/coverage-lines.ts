import type { FieldCoverage } from "../ingestion/ports.js";

/** Longest source shown; a longer expression is cut with `…`. */
const SOURCE_CHARS = 60;

/**
 * `preview`'s coverage lines (docs/connectors.md, Field coverage): per mapped field, its
 * path or expression and how many of the step's records gave it a value, so a path
 * that matches nothing (`stock  InfoStores[].Remain  0 of 50 records`) is seen before
 * the first run, not after a week of null stock.
 */
export function coverageLines(coverage: readonly FieldCoverage[]): string[] {
  if (coverage.length === 0) return [];
  const sources = coverage.map((c) =>
    c.source.length > SOURCE_CHARS ? `${c.source.slice(0, SOURCE_CHARS - 1)}…` : c.source,
  );
  const fieldWidth = Math.max(...coverage.map((c) => c.field.length));
  const sourceWidth = Math.max(...sources.map((s) => s.length));
  return [
    "  records with a value, per field:",
    ...coverage.map((c, i) => {
      const none = c.records > 0 && c.withValue === 0 ? "  (matched nothing)" : "";
      return `    ${c.field.padEnd(fieldWidth)}  ${(sources[i] as string).padEnd(sourceWidth)}  ${c.withValue} of ${c.records} records${none}`;
    }),
  ];
}
