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
  index,
  integer,
  jsonb,
  numeric,
  pgTable,
  primaryKey,
  text,
  timestamp,
  uniqueIndex,
} from "drizzle-orm/pg-core";

const tstz = (name: string) => timestamp(name, { withTimezone: true, mode: "date" });

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
  },
  (t) => [
    check("ingestion_runs_state_check", sql`${t.state} in ('running', 'succeeded', 'partial', 'failed')`),
    check("ingestion_runs_trigger_check", sql`${t.trigger} in ('schedule', 'retry', 'tick_once', 'forced')`),
    check("ingestion_runs_finished_check", sql`(${t.state} = 'running') = (${t.finishedAt} is null)`),
    // The due gate's backstop: one non-forced success per supplier and slot, even in a race.
    uniqueIndex("ingestion_runs_one_success_per_slot")
      .on(t.supplier, t.slotStart)
      .where(sql`${t.state} = 'succeeded' and ${t.trigger} <> 'forced'`),
    index("ingestion_runs_supplier_started").on(t.supplier, t.startedAt.desc()),
    index("ingestion_runs_supplier_success")
      .on(t.supplier, t.finishedAt.desc())
      .where(sql`${t.state} = 'succeeded'`),
    index("ingestion_runs_running").on(t.supplier).where(sql`${t.state} = 'running'`),
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
  },
  (t) => [primaryKey({ name: "supplier_offer_observations_key", columns: [t.supplier, t.sku, t.runId] })],
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
