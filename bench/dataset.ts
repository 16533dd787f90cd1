/**
 * The benchmark's data: exactly the records the simulator serves for a supplier
 * (same generator, `internal/simulator/catalog.ts`), as validated `Offer` pages, so
 * the ceiling, the peers and the store cases write the same rows the HTTP pipeline
 * fetches.
 */
import type { Offer, Page } from "../internal/ingestion/ports.js";
import { Catalog } from "../internal/simulator/catalog.js";
import type { SimulatorMutation } from "../internal/simulator/types.js";

export const BENCH_SUPPLIER = "bench";

/** A supplier catalog as pages of offers, regenerated after each mutation. */
export class BenchCatalog {
  private readonly catalog: Catalog;

  constructor(
    readonly supplier: string,
    readonly size: number,
    readonly pageSize: number,
  ) {
    this.catalog = new Catalog(supplier, size);
  }

  mutate(m: SimulatorMutation): void {
    this.catalog.mutate(m);
  }

  /** Every page of the live catalog, in served order (materialised: timing excludes generation). */
  pages(): Page[] {
    const pages: Page[] = [];
    for (let from = 0, seq = 1; from < this.catalog.liveCount; from += this.pageSize, seq++) {
      const offers: Offer[] = this.catalog.slice(from, from + this.pageSize).map((r) => ({
        sku: r.article,
        name: r.title,
        price: r.price.value,
        currency: r.price.currency,
        stock: r.stock.total,
      }));
      pages.push({ seq, offers, rejects: [], httpAttempts: 1 });
    }
    return pages;
  }
}
