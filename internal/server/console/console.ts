/**
 * The operator console (docs/operations.md, Operator console): read-only HTML pages on the health server.
 *
 * Invariants:
 * - It changes nothing: its queries are `select`s only.
 * - Each page costs a bounded number of indexed statements (see
 *   `store/console-queries.ts`), whatever the history's size.
 * - A slow or hung database costs at most {@link MAX_CONCURRENT_READS} pool
 *   connections: past that a page answers 503 at once, and every read settles
 *   within `queryTimeoutMs` (a page then says the database is unreachable).
 * - Every page carries {@link CONSOLE_HEADERS} (the CSP of docs/operations.md, Operator console, and `nosniff`),
 *   error pages included.
 * - A supplier's strip is drawn again only when its newest run changed (another id,
 *   or the same run in another state): runs are only ever added at the head, and
 *   only the newest can still be `running` (a run starts under the lease, after
 *   recovery closed every older running one), so the newest run's id and state are
 *   the strip's version. The cache holds one strip per enabled supplier.
 */
import type pg from "pg";
import type { SupplierConfig } from "../../config/types.js";
import type { Clock } from "../../platform/clock.js";
import { errorMessage } from "../../platform/errors.js";
import type { Logger } from "../../platform/logger.js";
import type { SecretRegistry } from "../../platform/redact.js";
import { parseRunId, readOverview, readRunDetail, type SupplierLatest } from "../../store/console-queries.js";
import {
  RUN_STATES,
  RUN_TRIGGERS,
  type RunCursor,
  type RunListFilter,
  type RunStateName,
  type RunTriggerName,
  readNeighbours,
  readSupplierDetail,
} from "../../store/console-supplier-queries.js";
import type { FreshnessSnapshot } from "../freshness.js";
import { evaluateSupplier } from "../readiness.js";
import type { ActionRequest, ConsoleAuth } from "./actions.js";
import type { Html } from "./html.js";
import { CONSOLE_HEADERS, type ConsoleInstance, HTML_CONTENT_TYPE } from "./layout.js";
import { renderOverview, renderStrip } from "./overview-page.js";
import { renderRun, renderRunNotFound, renderUnavailable } from "./run-page.js";
import { renderBadQuery, renderSupplier, renderSupplierNotFound } from "./supplier-page.js";

type RequestHeaders = ActionRequest["headers"];

/** Console reads in flight at once; more answer 503 rather than queue on the pool. */
export const MAX_CONCURRENT_READS = 2;

export interface ConsoleOptions {
  db: pg.Pool;
  /** The enabled suppliers, in the order of `SUPPLIER_SYNC_SUPPLIERS`. */
  suppliers: readonly SupplierConfig[];
  instance: ConsoleInstance;
  clock: Clock;
  log: Logger;
  /** Scrubs stored messages and payloads shown on the pages. */
  secrets: SecretRegistry;
  /** Freshness as `/readyz` sees it, for the overview when the database is down. */
  freshness: () => Promise<FreshnessSnapshot>;
  /** Bound of one page's reads. */
  queryTimeoutMs: number;
  /** Console actions, when `SUPPLIER_SYNC_ADMIN_TOKEN` is set (./actions.ts); absent: read-only. */
  auth?: ConsoleAuth;
}

export interface ConsolePage {
  status: number;
  headers: Record<string, string>;
  contentType: string;
  body: string;
}

export interface Console {
  /** `GET /`; `headers` carry the session cookie of console actions. */
  overview(headers?: RequestHeaders): Promise<ConsolePage>;
  /** `GET /runs/<idText>`. */
  run(idText: string, headers?: RequestHeaders): Promise<ConsolePage>;
  /** `GET /suppliers/<name>?state=…&trigger=…&before=<id>|after=<id>`. */
  supplier(name: string, query: URLSearchParams): Promise<ConsolePage>;
}

/**
 * The supplier page's query: `state` and `trigger` (repeatable; empty means any) and at
 * most one of `before` / `after` (a run id). A problem names the parameter and value.
 */
export function parseListQuery(
  query: URLSearchParams,
): { filter: RunListFilter; cursor: RunCursor } | { problem: string } {
  const states: RunStateName[] = [];
  const triggers: RunTriggerName[] = [];
  for (const [key, value] of query) {
    if (key === "state") {
      if (value === "") continue;
      if (!(RUN_STATES as readonly string[]).includes(value))
        return { problem: `state=${value} is not a run state (one of ${RUN_STATES.join(", ")}).` };
      if (!states.includes(value as RunStateName)) states.push(value as RunStateName);
    } else if (key === "trigger") {
      if (value === "") continue;
      if (!(RUN_TRIGGERS as readonly string[]).includes(value))
        return { problem: `trigger=${value} is not a run trigger (one of ${RUN_TRIGGERS.join(", ")}).` };
      if (!triggers.includes(value as RunTriggerName)) triggers.push(value as RunTriggerName);
    } else if (key === "before" || key === "after") {
      if (parseRunId(value) === undefined) return { problem: `${key}=${value} is not a run id.` };
    } else {
      return { problem: `${key} is not a parameter of this page (state, trigger, before, after).` };
    }
  }
  const before = query.getAll("before");
  const after = query.getAll("after");
  if (before.length + after.length > 1) return { problem: "Give at most one of before= and after=." };
  const cursor: RunCursor =
    before[0] !== undefined
      ? { kind: "before", id: before[0] }
      : after[0] !== undefined
        ? { kind: "after", id: after[0] }
        : { kind: "newest" };
  return { filter: { states, triggers }, cursor };
}

class ConsoleTimeoutError extends Error {
  override readonly name = "ConsoleTimeoutError";
  readonly code = "QUERY_TIMEOUT";
}

const reply = (status: number, body: Html): ConsolePage => ({
  status,
  headers: { ...CONSOLE_HEADERS },
  contentType: HTML_CONTENT_TYPE,
  body: body.text,
});

export function createConsole(options: ConsoleOptions): Console {
  const { db, suppliers, instance, clock, log, secrets } = options;
  const names = suppliers.map((s) => s.name);
  const bySupplier = new Map(suppliers.map((s) => [s.name, s]));
  let inFlight = 0;
  const strips = new Map<string, { version: string; html: Html }>();
  const emptyStrip = new Map(names.map((n) => [n, renderStrip(n, [])]));

  /** Runs `read` within the deadline and the concurrency bound; undefined when over the bound. */
  async function bounded<T>(read: () => Promise<T>): Promise<{ value: T } | { error: unknown } | undefined> {
    if (inFlight >= MAX_CONCURRENT_READS) return undefined;
    inFlight += 1;
    const query = read();
    // The slot is freed when the query itself settles, not when the page gave up on it.
    query.then(
      () => {
        inFlight -= 1;
      },
      () => {
        inFlight -= 1;
      },
    );
    const timeout = new AbortController();
    try {
      const value = await Promise.race([
        query,
        clock.sleep(options.queryTimeoutMs, timeout.signal).then(() => {
          throw new ConsoleTimeoutError(`console query did not answer within ${options.queryTimeoutMs} ms`);
        }),
      ]);
      return { value };
    } catch (err) {
      log.warn({ err: errorMessage(err) }, "console: database read failed");
      return { error: err };
    } finally {
      timeout.abort();
    }
  }

  const busy = () =>
    reply(
      503,
      renderUnavailable("The console is busy with other requests: try again in a moment.", instance),
    );

  return {
    async overview(headers = {}) {
      const auth = options.auth;
      const actions = auth
        ? {
            forSupplier: (name: string, paused: boolean) => auth.supplierForms(headers, name, paused),
            header: auth.logoutForm(headers),
          }
        : undefined;
      const versionOf = (l: SupplierLatest) => (l.lastRun ? `${l.lastRun.id}:${l.lastRun.state}` : "");
      const result = await bounded(() =>
        readOverview(db, names, (l) => strips.get(l.supplier)?.version !== versionOf(l)),
      );
      if (result === undefined) return busy();
      const nowMs = clock.now();
      if ("value" in result) {
        const { latest, strips: fresh } = result.value;
        for (const l of latest) {
          const marks = fresh.get(l.supplier);
          if (marks) strips.set(l.supplier, { version: versionOf(l), html: renderStrip(l.supplier, marks) });
          else if (l.lastRun === null) strips.delete(l.supplier);
        }
        // The readiness snapshot (cached) says what the guards hold and who is paused; the page shows without it.
        const snapshot = await options.freshness().catch(() => undefined);
        const page = renderOverview({
          held: snapshot?.held,
          suppliers,
          overview: new Map(latest.map((l) => [l.supplier, l])),
          strip: (name) => strips.get(name)?.html ?? emptyStrip.get(name) ?? renderStrip(name, []),
          fallbackLastSuccess: new Map(),
          database: "ok",
          paused: snapshot?.paused,
          ...(actions ? { actions } : {}),
          instance,
          secrets,
          nowMs,
        });
        return reply(200, page);
      }
      const snapshot = await options.freshness();
      return reply(
        503,
        renderOverview({
          suppliers,
          overview: undefined,
          strip: (name) => emptyStrip.get(name) ?? renderStrip(name, []),
          fallbackLastSuccess: snapshot.lastSuccess,
          database: "unreachable",
          paused: snapshot.paused,
          instance,
          secrets,
          nowMs,
        }),
      );
    },
    async run(idText, headers = {}) {
      const id = parseRunId(idText);
      if (id === undefined) {
        return reply(404, renderRunNotFound("That is not a run id.", instance, "ok"));
      }
      const result = await bounded(() => readRunDetail(db, id));
      if (result === undefined) return busy();
      if ("error" in result) {
        return reply(
          503,
          renderUnavailable("The database is unreachable: the run cannot be shown.", instance),
        );
      }
      if (result.value === undefined) {
        return reply(404, renderRunNotFound(`No run has id ${id}.`, instance, "ok"));
      }
      const detail = result.value;
      const enabled = bySupplier.has(detail.supplier);
      const near = await bounded(() => readNeighbours(db, detail.supplier, id));
      const neighbours = near !== undefined && "value" in near ? near.value : undefined;
      return reply(
        200,
        renderRun(
          id,
          detail,
          instance,
          secrets,
          { enabled, neighbours },
          options.auth?.runForms(headers, id),
        ),
      );
    },
    async supplier(name, query) {
      const supplier = bySupplier.get(name);
      if (supplier === undefined) return reply(404, renderSupplierNotFound(name, instance));
      const parsed = parseListQuery(query);
      if ("problem" in parsed) return reply(400, renderBadQuery(name, parsed.problem, instance));
      const result = await bounded(() => readSupplierDetail(db, name, parsed.filter, parsed.cursor));
      if (result === undefined) return busy();
      if ("error" in result) {
        return reply(
          503,
          renderUnavailable(`The database is unreachable: ${name}'s history cannot be shown.`, instance),
        );
      }
      const snapshot = await options.freshness();
      const nowMs = clock.now();
      const readiness = evaluateSupplier(
        supplier,
        snapshot.lastSuccess.get(name) ?? null,
        nowMs,
        snapshot.held.get(name),
      );
      return reply(
        200,
        renderSupplier({
          supplier,
          detail: result.value,
          filter: parsed.filter,
          readiness,
          instance,
          secrets,
          nowMs,
        }),
      );
    },
  };
}
