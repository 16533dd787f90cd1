/**
 * Slots: each supplier's interval aligned to the Unix epoch, so every instance and
 * every cron host computes the same slot for the same instant.
 */
import { type CronSpec, cronSlotAt, type Slot } from "./cron-slots.js";

export type { Slot } from "./cron-slots.js";

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
  return hashOf(supplier) % span;
}

/** The scheduled fire time of the slot after the one containing `nowMs`. */
export function nextSlotFireAt(nowMs: number, supplier: string, intervalMs: number): number {
  return slotStartOf(nowMs, intervalMs) + intervalMs + slotOffsetOf(supplier, intervalMs);
}

/**
 * A supplier's schedule: its interval (epoch-aligned slots), or its `cron(…)` spec
 * (slots from one fire time to the next, internal/ingestion/cron-slots.ts).
 */
export interface SupplierSchedule {
  name: string;
  intervalMs: number;
  cron?: CronSpec | undefined;
}

/** The slot containing `nowMs` under the supplier's schedule. */
export function supplierSlotAt(nowMs: number, supplier: SupplierSchedule): Slot {
  if (supplier.cron) return cronSlotAt(supplier.cron, nowMs);
  const startMs = slotStartOf(nowMs, supplier.intervalMs);
  return { startMs, endMs: startMs + supplier.intervalMs };
}

/** Longest jitter into a cron slot: cron users name the minute they want, so it stays close to it. */
export const MAX_CRON_JITTER_MS = 15_000;

/**
 * Where in `slot` the supplier fires: the slot's start plus its stable offset. Interval
 * slots keep {@link slotOffsetOf}; a cron slot's offset is at most a tenth of that
 * slot and 15 s.
 */
export function fireTimeOf(slot: Slot, supplier: SupplierSchedule): number {
  if (!supplier.cron) return slot.startMs + slotOffsetOf(supplier.name, supplier.intervalMs);
  const span = Math.min(Math.floor((slot.endMs - slot.startMs) / 10), MAX_CRON_JITTER_MS);
  return slot.startMs + (span <= 0 ? 0 : hashOf(supplier.name) % span);
}

/** The fire time of the slot after the one containing `nowMs`. */
export function nextFireAt(nowMs: number, supplier: SupplierSchedule): number {
  const current = supplierSlotAt(nowMs, supplier);
  return fireTimeOf(supplierSlotAt(current.endMs, supplier), supplier);
}

function hashOf(text: string): number {
  let hash = 2166136261;
  for (let i = 0; i < text.length; i++) {
    hash ^= text.charCodeAt(i);
    hash = Math.imul(hash, 16777619) >>> 0;
  }
  return hash;
}
