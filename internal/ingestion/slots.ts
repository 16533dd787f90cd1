/**
 * Slots: each supplier's interval aligned to the Unix epoch, so every instance and
 * every cron host computes the same slot for the same instant.
 */

/** Start (ms since epoch) of the slot containing `nowMs`. */
export function slotStartOf(nowMs: number, intervalMs: number): number {
  return Math.floor(nowMs / intervalMs) * intervalMs;
}

/**
 * Stable per-supplier offset into each slot (jitter), so many suppliers do not fire
 * together: at most a tenth of the interval and 5 minutes, the same on every instance.
 */
export function slotOffsetOf(supplier: string, intervalMs: number): number {
  const span = Math.min(Math.floor(intervalMs / 10), 300_000);
  if (span <= 0) return 0;
  let hash = 2166136261;
  for (let i = 0; i < supplier.length; i++) {
    hash ^= supplier.charCodeAt(i);
    hash = Math.imul(hash, 16777619) >>> 0;
  }
  return hash % span;
}

/** The scheduled fire time of the slot after the one containing `nowMs`. */
export function nextSlotFireAt(nowMs: number, supplier: string, intervalMs: number): number {
  return slotStartOf(nowMs, intervalMs) + intervalMs + slotOffsetOf(supplier, intervalMs);
}
