import type pg from "pg";
import type { BenchCatalog } from "../dataset.js";

/** What every case gets from bench/run.ts. */
export interface CaseContext {
  pool: pg.Pool;
  url: string;
  catalog: BenchCatalog;
  repetitions: number;
  /** Progress lines on stderr (the table goes to stdout). */
  progress(message: string): void;
}
