CREATE TABLE "ingestion_leases" (
	"supplier" text PRIMARY KEY NOT NULL,
	"holder" text NOT NULL,
	"token" bigint NOT NULL,
	"acquired_at" timestamp with time zone DEFAULT now() NOT NULL,
	"expires_at" timestamp with time zone NOT NULL
);
--> statement-breakpoint
CREATE TABLE "ingestion_run_seen" (
	"run_id" bigint NOT NULL,
	"seq" integer NOT NULL,
	"skus" text[] NOT NULL,
	CONSTRAINT "ingestion_run_seen_run_seq" PRIMARY KEY("run_id","seq")
);
