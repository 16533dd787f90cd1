CREATE TABLE "ingestion_rejects" (
	"id" bigserial PRIMARY KEY NOT NULL,
	"run_id" bigint NOT NULL,
	"supplier" text NOT NULL,
	"seq" integer NOT NULL,
	"reason" text NOT NULL,
	"raw" jsonb,
	"created_at" timestamp with time zone DEFAULT now() NOT NULL
);
--> statement-breakpoint
CREATE TABLE "ingestion_run_steps" (
	"run_id" bigint NOT NULL,
	"seq" integer NOT NULL,
	"state" text NOT NULL,
	"started_at" timestamp with time zone DEFAULT now() NOT NULL,
	"finished_at" timestamp with time zone,
	"records" integer DEFAULT 0 NOT NULL,
	"http_attempts" integer DEFAULT 0 NOT NULL,
	"error_code" text,
	CONSTRAINT "ingestion_run_steps_run_seq" PRIMARY KEY("run_id","seq"),
	CONSTRAINT "ingestion_run_steps_state_check" CHECK ("ingestion_run_steps"."state" in ('running', 'succeeded', 'failed'))
);
--> statement-breakpoint
CREATE TABLE "ingestion_runs" (
	"id" bigserial PRIMARY KEY NOT NULL,
	"supplier" text NOT NULL,
	"slot_start" timestamp with time zone NOT NULL,
	"trigger" text NOT NULL,
	"state" text DEFAULT 'running' NOT NULL,
	"error_code" text,
	"error_message" text,
	"owner" jsonb NOT NULL,
	"started_at" timestamp with time zone DEFAULT now() NOT NULL,
	"heartbeat_at" timestamp with time zone DEFAULT now() NOT NULL,
	"finished_at" timestamp with time zone,
	"pages" integer DEFAULT 0 NOT NULL,
	"records_seen" integer DEFAULT 0 NOT NULL,
	"records_inserted" integer DEFAULT 0 NOT NULL,
	"records_updated" integer DEFAULT 0 NOT NULL,
	"records_unchanged" integer DEFAULT 0 NOT NULL,
	"records_rejected" integer DEFAULT 0 NOT NULL,
	"records_delisted" integer DEFAULT 0 NOT NULL,
	CONSTRAINT "ingestion_runs_state_check" CHECK ("ingestion_runs"."state" in ('running', 'succeeded', 'partial', 'failed')),
	CONSTRAINT "ingestion_runs_trigger_check" CHECK ("ingestion_runs"."trigger" in ('schedule', 'retry', 'tick_once', 'forced')),
	CONSTRAINT "ingestion_runs_finished_check" CHECK (("ingestion_runs"."state" = 'running') = ("ingestion_runs"."finished_at" is null))
);
--> statement-breakpoint
CREATE TABLE "supplier_offer_observations" (
	"supplier" text NOT NULL,
	"sku" text NOT NULL,
	"run_id" bigint NOT NULL,
	"observed_at" timestamp with time zone DEFAULT now() NOT NULL,
	"price" numeric NOT NULL,
	"currency" char(3),
	"stock" integer,
	"content_hash" text NOT NULL,
	CONSTRAINT "supplier_offer_observations_key" PRIMARY KEY("supplier","sku","run_id")
);
--> statement-breakpoint
CREATE TABLE "supplier_offers" (
	"supplier" text NOT NULL,
	"sku" text NOT NULL,
	"name" text,
	"price" numeric NOT NULL,
	"currency" char(3),
	"stock" integer,
	"content_hash" text NOT NULL,
	"first_seen_at" timestamp with time zone DEFAULT now() NOT NULL,
	"last_changed_at" timestamp with time zone DEFAULT now() NOT NULL,
	"last_run_id" bigint NOT NULL,
	"delisted_at" timestamp with time zone,
	CONSTRAINT "supplier_offers_pkey" PRIMARY KEY("supplier","sku"),
	CONSTRAINT "supplier_offers_stock_check" CHECK ("supplier_offers"."stock" is null or "supplier_offers"."stock" >= 0)
);
--> statement-breakpoint
ALTER TABLE "ingestion_run_steps" ADD CONSTRAINT "ingestion_run_steps_run_id_ingestion_runs_id_fk" FOREIGN KEY ("run_id") REFERENCES "public"."ingestion_runs"("id") ON DELETE cascade ON UPDATE no action;--> statement-breakpoint
CREATE INDEX "ingestion_rejects_run" ON "ingestion_rejects" USING btree ("run_id","seq");--> statement-breakpoint
CREATE UNIQUE INDEX "ingestion_runs_one_success_per_slot" ON "ingestion_runs" USING btree ("supplier","slot_start") WHERE "ingestion_runs"."state" = 'succeeded' and "ingestion_runs"."trigger" <> 'forced';--> statement-breakpoint
CREATE INDEX "ingestion_runs_supplier_started" ON "ingestion_runs" USING btree ("supplier","started_at" DESC NULLS LAST);--> statement-breakpoint
CREATE INDEX "ingestion_runs_supplier_success" ON "ingestion_runs" USING btree ("supplier","finished_at" DESC NULLS LAST) WHERE "ingestion_runs"."state" = 'succeeded';--> statement-breakpoint
CREATE INDEX "ingestion_runs_running" ON "ingestion_runs" USING btree ("supplier") WHERE "ingestion_runs"."state" = 'running';