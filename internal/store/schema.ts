/**
 * The public tables (README.md, Tables; docs/architecture.md, The store). Natural keys carry unique constraints: they are
 * the last line of defence against duplicates, not application checks.
 * Migrations are generated from this file by drizzle-kit into `drizzle/` and never
 * edited after merge.
 */
import { sql } from "drizzle-orm";
import {
  bigint,
  bigserial,
  char,
  check,
  customType,
  date,
  index,
  integer,
  jsonb,
  numeric,
  pgSequence,
  pgTable,
  primaryKey,
  text,
  timestamp,
  uniqueIndex,
} from "drizzle-orm/pg-core";

const tstz = (name: string) => timestamp(name, { withTimezone: true, mode: "date" });

/** PostgreSQL's 64-bit transaction id (`pg_current_xact_id()`), read as its decimal text. */
const xid8 = customType<{ data: string; driverData: string }>({ dataType: () => "xid8" });

/** Ids of observations (the change feed's tie-breaker within one transaction, docs/changes.md). */
export const observationIds = pgSequence("supplier_offer_observations_id_seq");

export const ingestionRuns = pgTable(
  "ingestion_runs",
  {
    id: bigserial("id", { mode: "number" }).primaryKey(),
    supplier: text("supplier").notNull(),
    slotStart: tstz("slot_start").notNull(),
    trigger: text("trigger").notNull(),
    state: text("state").notNull().default("running"),
    errorCode: text("error_code"),
    errorMessage: text("error_message"),
    /** `{hostname, pid, bootId}` of the process that ran it. */
    owner: jsonb("owner").notNull(),
    startedAt: tstz("started_at").notNull().defaultNow(),
    heartbeatAt: tstz("heartbeat_at").notNull().defaultNow(),
    finishedAt: tstz("finished_at"),
    pages: integer("pages").notNull().default(0),
    recordsSeen: integer("records_seen").notNull().default(0),
    recordsInserted: integer("records_inserted").notNull().default(0),
    recordsUpdated: integer("records_updated").notNull().default(0),
    recordsUnchanged: integer("records_unchanged").notNull().default(0),
    recordsRejected: integer("records_rejected").notNull().default(0),
    recordsDelisted: integer("records_delisted").notNull().default(0),
    /**
     * Validators of the run's one response (docs/conditional-requests.md), sent back as `If-None-Match` /
     * `If-Modified-Since` by the next run; only a `succeeded` run's are ever reused.
     * Kept verbatim as the supplier sent them (an HTTP-date is text, not a timestamp).
     */
    etag: text("etag"),
    lastModified: text("last_modified"),
    /** Items the run's guards held (docs/connectors.md, Guards): a held delisting is one; 0 when none. */
    recordsHeld: integer("records_held").notNull().default(0),
    /**
     * Per mapped field, how many of the run's records carried a value:
     * `{"<field>": {"source": "<path or expression>", "records": n, "withValue": n}}`.
     */
    fieldCoverage: jsonb("field_coverage"),
    /** The date a `{date:…}` file was read for (docs/feeds.md), when the walk used one. */
    sourceDate: date("source_date", { mode: "string" }),
  },
  (t) => [
    check("ingestion_runs_state_check", sql`${t.state} in ('running', 'succeeded', 'partial', 'failed')`),
    check(
      "ingestion_runs_trigger_check",
      sql`${t.trigger} in ('schedule', 'retry', 'tick_once', 'forced', 'manual')`,
    ),
    check("ingestion_runs_finished_check", sql`(${t.state} = 'running') = (${t.finishedAt} is null)`),
    // The due gate's backstop: one scheduled success per supplier and slot, even in a race. Forced
    // and manual (trigger request) walks are extra walks, exempt (docs/operations.md, Triggering).
    uniqueIndex("ingestion_runs_one_success_per_slot")
      .on(t.supplier, t.slotStart)
      .where(sql`${t.state} = 'succeeded' and ${t.trigger} not in ('forced', 'manual')`),
    index("ingestion_runs_supplier_started").on(t.supplier, t.startedAt.desc()),
    index("ingestion_runs_supplier_success")
      .on(t.supplier, t.finishedAt.desc())
      .where(sql`${t.state} = 'succeeded'`),
    index("ingestion_runs_running").on(t.supplier).where(sql`${t.state} = 'running'`),
    // Complete walks: succeeded runs and complete walks held by a guard (docs/connectors.md, Guards),
    // for the due gate and freshness, which treat both as the slot's walk.
    index("ingestion_runs_complete_walk")
      .on(t.supplier, t.finishedAt.desc())
      .where(sql`${t.state} = 'succeeded' or (${t.state} = 'partial' and ${t.errorCode} = 'GUARD')`),
    // The console's supplier page (docs/operations.md, Operator console): a supplier's runs newest
    // first by id, keyset-paged, for any state and trigger, one bounded probe per (state, trigger).
    index("ingestion_runs_supplier_state_trigger_id").on(t.supplier, t.state, t.trigger, t.id),
  ],
);

export const ingestionRunSteps = pgTable(
  "ingestion_run_steps",
  {
    runId: bigint("run_id", { mode: "number" })
      .notNull()
      .references(() => ingestionRuns.id, { onDelete: "cascade" }),
    seq: integer("seq").notNull(),
    state: text("state").notNull(),
    startedAt: tstz("started_at").notNull().defaultNow(),
    finishedAt: tstz("finished_at"),
    records: integer("records").notNull().default(0),
    httpAttempts: integer("http_attempts").notNull().default(0),
    errorCode: text("error_code"),
  },
  (t) => [
    primaryKey({ name: "ingestion_run_steps_run_seq", columns: [t.runId, t.seq] }),
    check("ingestion_run_steps_state_check", sql`${t.state} in ('running', 'succeeded', 'failed')`),
  ],
);

export const supplierOffers = pgTable(
  "supplier_offers",
  {
    supplier: text("supplier").notNull(),
    sku: text("sku").notNull(),
    name: text("name"),
    /** Null: price on request (the connector's `nullIf`, docs/connectors.md, Records and fields). */
    price: numeric("price"),
    currency: char("currency", { length: 3 }),
    stock: integer("stock"),
    /** Further supplier data (the connector's `attributes`); null when none. */
    attributes: jsonb("attributes"),
    contentHash: text("content_hash").notNull(),
    firstSeenAt: tstz("first_seen_at").notNull().defaultNow(),
    lastChangedAt: tstz("last_changed_at").notNull().defaultNow(),
    lastRunId: bigint("last_run_id", { mode: "number" }).notNull(),
    delistedAt: tstz("delisted_at"),
  },
  (t) => [
    primaryKey({ name: "supplier_offers_pkey", columns: [t.supplier, t.sku] }),
    check("supplier_offers_stock_check", sql`${t.stock} is null or ${t.stock} >= 0`),
  ],
);

export const supplierOfferObservations = pgTable(
  "supplier_offer_observations",
  {
    supplier: text("supplier").notNull(),
    sku: text("sku").notNull(),
    runId: bigint("run_id", { mode: "number" }).notNull(),
    observedAt: tstz("observed_at").notNull().defaultNow(),
    price: numeric("price"),
    currency: char("currency", { length: 3 }),
    stock: integer("stock"),
    attributes: jsonb("attributes"),
    contentHash: text("content_hash").notNull(),
    /**
     * The change feed's position (docs/changes.md): the writing transaction's id and a
     * sequence number. Null on rows written before migration 0006 (not in the feed).
     */
    id: bigint("id", { mode: "number" }).default(sql`nextval('supplier_offer_observations_id_seq')`),
    txid: xid8("txid").default(sql`pg_current_xact_id()`),
    /** `listed` (first sighting), `changed`, `delisted`, `relisted`; null before migration 0006. */
    kind: text("kind"),
  },
  (t) => [
    primaryKey({ name: "supplier_offer_observations_key", columns: [t.supplier, t.sku, t.runId] }),
    check(
      "supplier_offer_observations_kind_check",
      sql`${t.kind} in ('listed', 'changed', 'delisted', 'relisted')`,
    ),
    // The feed reads one transaction's id range ({@link supplierOfferFeedTransactions}) through
    // it: a summary per block range, not an entry per row, so it costs a page almost nothing to
    // keep (bench/README.md, Change feed). Built CONCURRENTLY after the migration's transaction
    // (migrate.ts, online indexes).
    index("supplier_offer_observations_id_brin")
      .using("brin", t.id)
      .with({ pages_per_range: 32, autosummarize: true }),
  ],
);

/**
 * The change feed's index of transactions (docs/changes.md): one row per transaction
 * that wrote observations, with the smallest and largest `id` it wrote. Kept by the
 * statement-level triggers on `supplier_offer_observations` (migration 0008), so no
 * writer can leave a row out; the feed walks it in `txid` order and reads each
 * transaction's rows by `id between min_id and max_id and txid = t.txid`.
 */
export const supplierOfferFeedTransactions = pgTable("supplier_offer_feed_transactions", {
  txid: xid8("txid").primaryKey(),
  minId: bigint("min_id", { mode: "number" }).notNull(),
  maxId: bigint("max_id", { mode: "number" }).notNull(),
});

/**
 * Run events (docs/changes.md, Run events): an outbox written in the transaction that
 * closed the run (or held, paused or decided), delivered to the webhook at least once,
 * in order per supplier. `next_attempt_at` is the retry backoff's, durable across restarts.
 */
export const ingestionEvents = pgTable(
  "ingestion_events",
  {
    id: bigserial("id", { mode: "number" }).primaryKey(),
    createdAt: tstz("created_at").notNull().defaultNow(),
    supplier: text("supplier").notNull(),
    type: text("type").notNull(),
    payload: jsonb("payload").notNull(),
    deliveredAt: tstz("delivered_at"),
    attempts: integer("attempts").notNull().default(0),
    lastError: text("last_error"),
    nextAttemptAt: tstz("next_attempt_at"),
  },
  (t) => [
    index("ingestion_events_undelivered").on(t.supplier, t.id).where(sql`${t.deliveredAt} is null`),
    index("ingestion_events_created").on(t.createdAt),
  ],
);

export const ingestionRejects = pgTable(
  "ingestion_rejects",
  {
    id: bigserial("id", { mode: "number" }).primaryKey(),
    runId: bigint("run_id", { mode: "number" }).notNull(),
    supplier: text("supplier").notNull(),
    seq: integer("seq").notNull(),
    reason: text("reason").notNull(),
    raw: jsonb("raw"),
    createdAt: tstz("created_at").notNull().defaultNow(),
  },
  (t) => [index("ingestion_rejects_run").on(t.runId, t.seq)],
);

/**
 * The table lease (docs/operations.md, Choosing the lease; `SUPPLIER_SYNC_LEASE=table`): one row per supplier
 * that ever had one. `token` is the fencing token, incremented at every acquire; a
 * holder is current while `expires_at > now()` and its token is the row's.
 */
export const ingestionLeases = pgTable("ingestion_leases", {
  supplier: text("supplier").primaryKey(),
  /** `hostname/pid/boot id` of the process holding (or last holding) it. */
  holder: text("holder").notNull(),
  token: bigint("token", { mode: "number" }).notNull(),
  acquiredAt: tstz("acquired_at").notNull().defaultNow(),
  expiresAt: tstz("expires_at").notNull(),
});

/**
 * The seen set of runs under the table lease (internal; see seen-set.ts): one row per
 * committed step, the step's SKUs as one array. Under the advisory lease the set lives
 * in a session temp table instead; through a transaction pooler there is no session
 * to keep it in. Rows are deleted when their run is closed or recovered.
 */
export const ingestionRunSeen = pgTable(
  "ingestion_run_seen",
  {
    runId: bigint("run_id", { mode: "number" }).notNull(),
    seq: integer("seq").notNull(),
    skus: text("skus").array().notNull(),
  },
  (t) => [primaryKey({ name: "ingestion_run_seen_run_seq", columns: [t.runId, t.seq] })],
);

/**
 * What the guards held (docs/connectors.md, Guards): one row per held offer change
 * (`price_jump`, `currency`: `sku` set), per vanished field (`field`: `field` set) or
 * per held delisting (`delist`). `stored` and `proposed` are the offer's fields before
 * and as the run would have written them (for `delist`, the counts). Decided once:
 * `held` → `approved` | `dismissed` | `stale`.
 */
export const ingestionHeld = pgTable(
  "ingestion_held",
  {
    id: bigserial("id", { mode: "number" }).primaryKey(),
    runId: bigint("run_id", { mode: "number" })
      .notNull()
      .references(() => ingestionRuns.id, { onDelete: "cascade" }),
    supplier: text("supplier").notNull(),
    /** The held offer's SKU; null for a held delisting or field. */
    sku: text("sku"),
    kind: text("kind").notNull(),
    /** The vanished field (`stock`, `name`, an attribute's name) of a `field` item; null otherwise. */
    field: text("field"),
    reason: text("reason").notNull(),
    stored: jsonb("stored"),
    proposed: jsonb("proposed"),
    state: text("state").notNull().default("held"),
    createdAt: tstz("created_at").notNull().defaultNow(),
    decidedAt: tstz("decided_at"),
    decidedBy: text("decided_by"),
  },
  (t) => [
    check("ingestion_held_kind_check", sql`${t.kind} in ('price_jump', 'currency', 'delist', 'field')`),
    check("ingestion_held_state_check", sql`${t.state} in ('held', 'approved', 'dismissed', 'stale')`),
    check("ingestion_held_decided_check", sql`(${t.state} = 'held') = (${t.decidedAt} is null)`),
    // One item per held offer, field or delisting of a run.
    uniqueIndex("ingestion_held_run_item").on(
      t.runId,
      t.kind,
      sql`coalesce(${t.sku}, '')`,
      sql`coalesce(${t.field}, '')`,
    ),
    index("ingestion_held_undecided").on(t.supplier, t.sku).where(sql`${t.state} = 'held'`),
  ],
);

/**
 * SKU lists of held items, one row per step as in the seen set: for a `delist` item,
 * the SKUs its run and every later run of the supplier saw (what approval must not
 * delist); for a `field` item, the offers whose field approval empties.
 */
export const ingestionHeldSkus = pgTable(
  "ingestion_held_skus",
  {
    heldId: bigint("held_id", { mode: "number" })
      .notNull()
      .references(() => ingestionHeld.id, { onDelete: "cascade" }),
    runId: bigint("run_id", { mode: "number" }).notNull(),
    seq: integer("seq").notNull(),
    skus: text("skus").array().notNull(),
  },
  (t) => [primaryKey({ name: "ingestion_held_skus_key", columns: [t.heldId, t.runId, t.seq] })],
);

/** Operator controls per supplier (docs/operations.md, Pausing): paused while `paused_at` is set. */
export const ingestionControls = pgTable("ingestion_controls", {
  supplier: text("supplier").primaryKey(),
  pausedAt: tstz("paused_at"),
  pausedBy: text("paused_by"),
  pauseReason: text("pause_reason"),
});

/**
 * Requests for one forced walk now (`supplier-sync trigger`, the console): taken by one
 * daemon (`taken_at`), served by the run `run_id`.
 */
export const ingestionTriggers = pgTable(
  "ingestion_triggers",
  {
    id: bigserial("id", { mode: "number" }).primaryKey(),
    supplier: text("supplier").notNull(),
    requestedAt: tstz("requested_at").notNull().defaultNow(),
    requestedBy: text("requested_by").notNull(),
    takenAt: tstz("taken_at"),
    runId: bigint("run_id", { mode: "number" }),
  },
  (t) => [index("ingestion_triggers_pending").on(t.supplier, t.requestedAt).where(sql`${t.takenAt} is null`)],
);
