CREATE TABLE "supplier_offer_feed_transactions" (
	"txid" "xid8" PRIMARY KEY NOT NULL,
	"min_id" bigint NOT NULL,
	"max_id" bigint NOT NULL
);
--> statement-breakpoint
SELECT set_config('supplier_sync.feed_backfill_from', pg_snapshot_xmin(pg_current_snapshot())::text, true);
--> statement-breakpoint
INSERT INTO "supplier_offer_feed_transactions" ("txid", "min_id", "max_id")
SELECT "txid", min("id"), max("id") FROM "supplier_offer_observations"
 WHERE "txid" IS NOT NULL AND "id" IS NOT NULL
 GROUP BY "txid";
--> statement-breakpoint
CREATE FUNCTION "supplier_offer_feed_note_transactions"() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
	-- One row per writing transaction, widened by each of its statements (docs/changes.md).
	INSERT INTO "supplier_offer_feed_transactions" AS f ("txid", "min_id", "max_id")
	SELECT w."txid", min(w."id"), max(w."id") FROM written w
	 WHERE w."txid" IS NOT NULL AND w."id" IS NOT NULL
	 GROUP BY w."txid"
	ON CONFLICT ("txid") DO UPDATE
	   SET "min_id" = least(f."min_id", excluded."min_id"), "max_id" = greatest(f."max_id", excluded."max_id")
	 WHERE excluded."min_id" < f."min_id" OR excluded."max_id" > f."max_id";
	RETURN NULL;
END $$;
--> statement-breakpoint
CREATE TRIGGER "supplier_offer_observations_feed_insert" AFTER INSERT ON "supplier_offer_observations"
	REFERENCING NEW TABLE AS written FOR EACH STATEMENT EXECUTE FUNCTION "supplier_offer_feed_note_transactions"();
--> statement-breakpoint
CREATE TRIGGER "supplier_offer_observations_feed_update" AFTER UPDATE ON "supplier_offer_observations"
	REFERENCING NEW TABLE AS written FOR EACH STATEMENT EXECUTE FUNCTION "supplier_offer_feed_note_transactions"();
--> statement-breakpoint
INSERT INTO "supplier_offer_feed_transactions" AS f ("txid", "min_id", "max_id")
SELECT "txid", min("id"), max("id") FROM "supplier_offer_observations"
 WHERE "txid" >= current_setting('supplier_sync.feed_backfill_from')::xid8 AND "id" IS NOT NULL
 GROUP BY "txid"
ON CONFLICT ("txid") DO UPDATE
   SET "min_id" = least(f."min_id", excluded."min_id"), "max_id" = greatest(f."max_id", excluded."max_id");
--> statement-breakpoint
CREATE INDEX CONCURRENTLY IF NOT EXISTS "supplier_offer_observations_id_brin" ON "supplier_offer_observations" USING brin ("id") WITH (pages_per_range=32,autosummarize=true);--> statement-breakpoint
DROP INDEX CONCURRENTLY IF EXISTS "supplier_offer_observations_feed";
