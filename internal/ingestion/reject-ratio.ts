import type { Page } from "./ports.js";

/**
 * The one reject-ratio rule, for a run (tick.ts) and a preview alike: a step whose
 * rejects are more than `maxRejectRatio` of its records fails `CONTRACT` and the walk
 * goes no further. Returns that failure's message, or null for a step within the ratio
 * (or with no records at all).
 */
export function rejectRatioExceeded(
  page: Pick<Page, "seq" | "offers" | "rejects">,
  maxRejectRatio: number,
): string | null {
  const total = page.offers.length + page.rejects.length;
  if (total === 0 || page.rejects.length / total <= maxRejectRatio) return null;
  return `${page.rejects.length} of ${total} records invalid on step ${page.seq} (maxRejectRatio ${maxRejectRatio}); first: ${page.rejects[0]?.reason ?? ""}`;
}
