CREATE INDEX CONCURRENTLY IF NOT EXISTS "ingestion_runs_supplier_state_trigger_id" ON "ingestion_runs" USING btree ("supplier","state","trigger","id");
