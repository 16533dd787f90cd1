/**
 * The `/readyz` verdict (docs/operations.md, Health server), a pure function of configuration, a freshness
 * snapshot and the current time.
 *
 * - A supplier is `ok` while its last success is younger than 2 × its interval,
 *   `stale` from then on, and `none` if it never succeeded: a fresh boot must not
 *   flap to 503, so `none` never fails readiness.
 * - A supplier whose newest complete walk is held by a guard (docs/connectors.md, Guards) is `held`,
 *   with that run's id, while it is younger than the threshold: the hold is an alert
 *   for the metrics, not a reason to pull the pod, and never makes a supplier stale.
 * - A supplier an operator paused (docs/operations.md, Pausing) is `paused`, whatever its age:
 *   it is not walked on purpose, so it is neither stale nor a 503. Precedence:
 *   paused > stale > held > ok.
 * - Ready (200) needs a reachable database and no `stale` supplier.
 */
import type { SupplierConfig } from "../config/types.js";
import { supplierSlotAt } from "../ingestion/slots.js";
import type { SupplierHold } from "../store/run-queries.js";
import type { FreshnessSnapshot } from "./freshness.js";

export type SupplierFreshness = "ok" | "stale" | "none" | "held" | "paused";

/** One supplier's entry in the `/readyz` body. Field names are public (docs/operations.md, Health server). */
export interface SupplierReadiness {
  status: SupplierFreshness;
  /** ISO 8601, or null if the supplier never succeeded. */
  last_success: string | null;
  /** Seconds since the last success (ms precision), or null if none. */
  age_seconds: number | null;
  /** 2 × interval, in seconds. */
  threshold_seconds: number;
  /** `held`: the run whose items wait for a decision (`supplier-sync held`). */
  held_run_id?: number;
  /** Undecided held items of the supplier, when there are any. */
  held_items?: number;
  /** `paused`: since when (ISO 8601). */
  paused_at?: string;
}

/** The `/readyz` body. Field names are public (docs/operations.md, Health server). */
export interface ReadinessBody {
  status: "ok" | "stale" | "unavailable";
  database: "ok" | "unreachable";
  suppliers: Record<string, SupplierReadiness>;
}

export interface Readiness {
  httpStatus: 200 | 503;
  body: ReadinessBody;
}

/** A supplier is stale once its last success is this many intervals old. */
export const STALE_AFTER_INTERVALS = 2;

/** Evaluates one supplier against its threshold at `nowMs`. */
export function evaluateSupplier(
  supplier: SupplierConfig,
  lastSuccess: Date | null,
  nowMs: number,
  held: SupplierHold = { runId: null, items: 0 },
  pausedAt: Date | null = null,
): SupplierReadiness {
  const entry = freshnessOf(supplier, lastSuccess, nowMs, held);
  return pausedAt === null ? entry : { ...entry, status: "paused", paused_at: pausedAt.toISOString() };
}

function freshnessOf(
  supplier: SupplierConfig,
  lastSuccess: Date | null,
  nowMs: number,
  held: SupplierHold,
): SupplierReadiness {
  const slot = supplierSlotAt(nowMs, supplier);
  const thresholdMs = STALE_AFTER_INTERVALS * (slot.endMs - slot.startMs);
  const threshold_seconds = thresholdMs / 1000;
  const holds = held.items > 0 ? { held_items: held.items } : {};
  if (lastSuccess === null)
    return { status: "none", last_success: null, age_seconds: null, threshold_seconds, ...holds };
  // Another host's clock may run slightly ahead of ours: a success "in the future" is fresh.
  const ageMs = Math.max(0, nowMs - lastSuccess.getTime());
  const fresh = ageMs < thresholdMs;
  return {
    status: !fresh ? "stale" : held.runId !== null ? "held" : "ok",
    last_success: lastSuccess.toISOString(),
    age_seconds: ageMs / 1000,
    threshold_seconds,
    ...(fresh && held.runId !== null ? { held_run_id: held.runId } : {}),
    ...holds,
  };
}

/** The verdict over `suppliers` (the enabled ones, or one of them for `/readyz/<supplier>`). */
export function evaluateReadiness(
  suppliers: readonly SupplierConfig[],
  snapshot: FreshnessSnapshot,
  nowMs: number,
): Readiness {
  const entries: Record<string, SupplierReadiness> = {};
  let stale = false;
  for (const supplier of suppliers) {
    const entry = evaluateSupplier(
      supplier,
      snapshot.lastSuccess.get(supplier.name) ?? null,
      nowMs,
      snapshot.held.get(supplier.name),
      snapshot.paused?.get(supplier.name) ?? null,
    );
    if (entry.status === "stale") stale = true;
    entries[supplier.name] = entry;
  }
  const status = snapshot.database === "unreachable" ? "unavailable" : stale ? "stale" : "ok";
  return {
    httpStatus: status === "ok" ? 200 : 503,
    body: { status, database: snapshot.database, suppliers: entries },
  };
}
