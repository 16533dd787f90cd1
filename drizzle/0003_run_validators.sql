ALTER TABLE "ingestion_runs" ADD COLUMN "etag" text;--> statement-breakpoint
ALTER TABLE "ingestion_runs" ADD COLUMN "last_modified" text;