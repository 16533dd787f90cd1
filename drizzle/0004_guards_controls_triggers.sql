CREATE TABLE "ingestion_controls" (
	"supplier" text PRIMARY KEY NOT NULL,
	"paused_at" timestamp with time zone,
	"paused_by" text,
	"pause_reason" text
);
--> statement-breakpoint
CREATE TABLE "ingestion_held" (
	"id" bigserial PRIMARY KEY NOT NULL,
	"run_id" bigint NOT NULL,
	"supplier" text NOT NULL,
	"sku" text,
	"kind" text NOT NULL,
	"field" text,
	"reason" text NOT NULL,
	"stored" jsonb,
	"proposed" jsonb,
	"state" text DEFAULT 'held' NOT NULL,
	"created_at" timestamp with time zone DEFAULT now() NOT NULL,
	"decided_at" timestamp with time zone,
	"decided_by" text,
	CONSTRAINT "ingestion_held_kind_check" CHECK ("ingestion_held"."kind" in ('price_jump', 'currency', 'delist', 'field')),
	CONSTRAINT "ingestion_held_state_check" CHECK ("ingestion_held"."state" in ('held', 'approved', 'dismissed', 'stale')),
	CONSTRAINT "ingestion_held_decided_check" CHECK (("ingestion_held"."state" = 'held') = ("ingestion_held"."decided_at" is null))
);
--> statement-breakpoint
CREATE TABLE "ingestion_held_skus" (
	"held_id" bigint NOT NULL,
	"run_id" bigint NOT NULL,
	"seq" integer NOT NULL,
	"skus" text[] NOT NULL,
	CONSTRAINT "ingestion_held_skus_key" PRIMARY KEY("held_id","run_id","seq")
);
--> statement-breakpoint
CREATE TABLE "ingestion_triggers" (
	"id" bigserial PRIMARY KEY NOT NULL,
	"supplier" text NOT NULL,
	"requested_at" timestamp with time zone DEFAULT now() NOT NULL,
	"requested_by" text NOT NULL,
	"taken_at" timestamp with time zone,
	"run_id" bigint
);
--> statement-breakpoint
ALTER TABLE "ingestion_runs" DROP CONSTRAINT "ingestion_runs_trigger_check";--> statement-breakpoint
ALTER TABLE "ingestion_runs" ADD COLUMN "records_held" integer DEFAULT 0 NOT NULL;--> statement-breakpoint
ALTER TABLE "ingestion_runs" ADD COLUMN "field_coverage" jsonb;--> statement-breakpoint
ALTER TABLE "ingestion_runs" ADD COLUMN "source_date" date;--> statement-breakpoint
ALTER TABLE "ingestion_held" ADD CONSTRAINT "ingestion_held_run_id_ingestion_runs_id_fk" FOREIGN KEY ("run_id") REFERENCES "public"."ingestion_runs"("id") ON DELETE cascade ON UPDATE no action;--> statement-breakpoint
ALTER TABLE "ingestion_held_skus" ADD CONSTRAINT "ingestion_held_skus_held_id_ingestion_held_id_fk" FOREIGN KEY ("held_id") REFERENCES "public"."ingestion_held"("id") ON DELETE cascade ON UPDATE no action;--> statement-breakpoint
CREATE UNIQUE INDEX "ingestion_held_run_item" ON "ingestion_held" USING btree ("run_id","kind",coalesce("sku", ''),coalesce("field", ''));--> statement-breakpoint
CREATE INDEX "ingestion_held_undecided" ON "ingestion_held" USING btree ("supplier","sku") WHERE "ingestion_held"."state" = 'held';--> statement-breakpoint
CREATE INDEX "ingestion_triggers_pending" ON "ingestion_triggers" USING btree ("supplier","requested_at") WHERE "ingestion_triggers"."taken_at" is null;--> statement-breakpoint
CREATE INDEX "ingestion_runs_complete_walk" ON "ingestion_runs" USING btree ("supplier","finished_at" DESC NULLS LAST) WHERE "ingestion_runs"."state" = 'succeeded' or ("ingestion_runs"."state" = 'partial' and "ingestion_runs"."error_code" = 'GUARD');--> statement-breakpoint
ALTER TABLE "ingestion_runs" ADD CONSTRAINT "ingestion_runs_trigger_check" CHECK ("ingestion_runs"."trigger" in ('schedule', 'retry', 'tick_once', 'forced', 'manual')) NOT VALID;