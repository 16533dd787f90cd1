import type pg from "pg";
import type { Connector, GuardSettings } from "../../internal/ingestion/ports.js";
import { runTick, type TickDeps, type TickResult } from "../../internal/ingestion/tick.js";
import { acquireLease } from "../../internal/lease/lease.js";
import { createMetrics } from "../../internal/observability/metrics.js";
import { systemClock } from "../../internal/platform/clock.js";
import { createLogger, type Logger } from "../../internal/platform/logger.js";
import { SecretRegistry } from "../../internal/platform/redact.js";
import { runSessions } from "../../internal/store/run-session.js";

/** What `runTick` needs, on `pool`, with a real advisory lease and the real store's run sessions. */
export function tickDeps(
  pool: pg.Pool,
  log: Logger = createLogger({ level: "silent", secrets: new SecretRegistry() }),
  heartbeatMs = 1_000,
): TickDeps {
  return {
    sessions: runSessions(pool, (name) => acquireLease(pool, name, log), { clock: systemClock, heartbeatMs }),
    log,
    metrics: createMetrics({ processMetrics: false }),
    clock: systemClock,
    owner: { hostname: "test", pid: 1, bootId: "b" },
  };
}

/** One forced tick of `name` (past the due gate, not the lease) with `connector` (guards off unless given). */
export function forcedTick(
  deps: TickDeps,
  name: string,
  connector: Connector,
  guards: GuardSettings | null = null,
): Promise<TickResult> {
  return runTick(deps, {
    supplier: { name, intervalMs: 3_600_000, enabled: true },
    trigger: "tick_once",
    force: true,
    connector: { kind: "ok", connector, maxRejectRatio: 0.5, runMs: 60_000, guards },
  });
}
