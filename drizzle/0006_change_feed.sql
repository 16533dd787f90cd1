CREATE SEQUENCE "public"."supplier_offer_observations_id_seq" INCREMENT BY 1 MINVALUE 1 MAXVALUE 9223372036854775807 START WITH 1 CACHE 1;--> statement-breakpoint
CREATE TABLE "ingestion_events" (
	"id" bigserial PRIMARY KEY NOT NULL,
	"created_at" timestamp with time zone DEFAULT now() NOT NULL,
	"supplier" text NOT NULL,
	"type" text NOT NULL,
	"payload" jsonb NOT NULL,
	"delivered_at" timestamp with time zone,
	"attempts" integer DEFAULT 0 NOT NULL,
	"last_error" text,
	"next_attempt_at" timestamp with time zone
);
--> statement-breakpoint
ALTER TABLE "supplier_offer_observations" ADD COLUMN "id" bigint;--> statement-breakpoint
ALTER TABLE "supplier_offer_observations" ADD COLUMN "txid" "xid8";--> statement-breakpoint
ALTER TABLE "supplier_offer_observations" ADD COLUMN "kind" text;--> statement-breakpoint
ALTER TABLE "supplier_offer_observations" ALTER COLUMN "id" SET DEFAULT nextval('supplier_offer_observations_id_seq');--> statement-breakpoint
ALTER TABLE "supplier_offer_observations" ALTER COLUMN "txid" SET DEFAULT pg_current_xact_id();--> statement-breakpoint
ALTER SEQUENCE "public"."supplier_offer_observations_id_seq" OWNED BY "supplier_offer_observations"."id";--> statement-breakpoint
CREATE INDEX "ingestion_events_undelivered" ON "ingestion_events" USING btree ("supplier","id") WHERE "ingestion_events"."delivered_at" is null;--> statement-breakpoint
CREATE INDEX "ingestion_events_created" ON "ingestion_events" USING btree ("created_at");--> statement-breakpoint
ALTER TABLE "supplier_offer_observations" ADD CONSTRAINT "supplier_offer_observations_kind_check" CHECK ("supplier_offer_observations"."kind" in ('listed', 'changed', 'delisted', 'relisted')) NOT VALID;--> statement-breakpoint
CREATE INDEX CONCURRENTLY IF NOT EXISTS "supplier_offer_observations_feed" ON "supplier_offer_observations" USING btree ("txid","id");
