import type { SimulatorMutation, SimulatorRecord } from "./types.js";

/**
 * The deterministic catalog of one supplier. Nothing is materialised: the live
 * offers are a short list of index segments, price changes a map index →
 * version, and a record is computed from a hash of (supplier, index, version).
 * Serving a page is O(page); memory is O(segments + changed prices).
 *
 * Invariant: segments are sorted, disjoint and non-empty; indices are never
 * reused (`nextIndex` only grows until `reset`), so an added offer is a new SKU.
 */

/** 32-bit integer mix (murmur3 finaliser): cheap and well spread. */
function mix(h: number): number {
  let x = h | 0;
  x ^= x >>> 16;
  x = Math.imul(x, 0x85ebca6b);
  x ^= x >>> 13;
  x = Math.imul(x, 0xc2b2ae35);
  x ^= x >>> 16;
  return x >>> 0;
}

/** FNV-1a of a string, used once per supplier as the hash seed. */
export function hashString(s: string): number {
  let h = 0x811c9dc5;
  for (let i = 0; i < s.length; i++) {
    h ^= s.charCodeAt(i);
    h = Math.imul(h, 0x01000193);
  }
  return h >>> 0;
}

function hash3(seed: number, a: number, b: number): number {
  return mix(mix(seed ^ Math.imul(a, 0x9e3779b1)) ^ Math.imul(b + 1, 0x27d4eb2f));
}

/** The SKU of offer `index` of `supplier` (`ETM-0000001` for offer 1 of `etm`). */
export function skuOf(supplier: string, index: number): string {
  return `${supplier.toUpperCase()}-${String(index).padStart(7, "0")}`;
}

const INVALID_KINDS = ["missing-article", "bad-price", "bad-currency", "negative-stock"] as const;
export type InvalidKind = (typeof INVALID_KINDS)[number];

/**
 * Which invalid kind offer `index` has under `rate`, or null when valid.
 * Exactly floor(n × rate) of the indices 0..n-1 are invalid, evenly spread,
 * and the kinds rotate through {@link INVALID_KINDS}.
 */
export function invalidKindOf(index: number, rate: number): InvalidKind | null {
  if (rate <= 0) return null;
  const before = Math.floor(index * rate);
  const after = Math.floor((index + 1) * rate);
  if (after === before) return null;
  return INVALID_KINDS[(after - 1) % INVALID_KINDS.length] ?? null;
}

export class Catalog {
  private readonly seed: number;
  private readonly label: string;
  /** [start, end) index ranges of live offers, in served order. */
  private segments: [number, number][] = [];
  private nextIndex = 0;
  private readonly versions = new Map<number, number>();
  /** Offer index → price text set by `setPrices`; cleared by a version change. */
  private readonly priceTexts = new Map<number, string>();
  /** Offer index → currency set by `setCurrencies`. */
  private readonly currencies = new Map<number, string>();
  /** Position (mod live count) where the next `changePrices` starts. */
  private priceCursor = 0;
  /** Offer index → stock version, bumped by `changeStock`. */
  private readonly stockVersions = new Map<number, number>();
  private stockCursor = 0;
  private live = 0;

  constructor(
    private readonly supplier: string,
    private readonly size: number,
  ) {
    this.seed = hashString(supplier);
    this.label = supplier.charAt(0).toUpperCase() + supplier.slice(1);
    this.reset();
  }

  get liveCount(): number {
    return this.live;
  }

  reset(): void {
    this.segments = this.size > 0 ? [[0, this.size]] : [];
    this.nextIndex = this.size;
    this.versions.clear();
    this.priceTexts.clear();
    this.currencies.clear();
    this.priceCursor = 0;
    this.stockVersions.clear();
    this.stockCursor = 0;
    this.live = this.size;
  }

  mutate(m: SimulatorMutation): void {
    if (m.reset) this.reset();
    if (m.changePrices) this.changePrices(m.changePrices);
    if (m.changeStock) this.changeStock(m.changeStock);
    if (m.remove) this.remove(m.remove);
    if (m.add) this.add(m.add);
    if (m.setPrices) this.setPrices(m.setPrices);
    if (m.setCurrencies) this.setCurrencies(m.setCurrencies);
  }

  /** Serves `currency` for the offer of each SKU; a SKU this catalog never had is a RangeError. */
  setCurrencies(currencies: Record<string, string>): void {
    for (const [sku, currency] of Object.entries(currencies)) {
      const index = this.indexOfSku(sku);
      if (index === undefined)
        throw new RangeError(`setCurrencies: ${JSON.stringify(sku)} is not a SKU of this catalog`);
      this.currencies.set(index, currency);
    }
  }

  /** Serves `price` for the offer of each SKU; a SKU this catalog never had is a RangeError. */
  setPrices(prices: Record<string, string>): void {
    for (const [sku, price] of Object.entries(prices)) {
      const index = this.indexOfSku(sku);
      if (index === undefined)
        throw new RangeError(`setPrices: ${JSON.stringify(sku)} is not a SKU of this catalog`);
      this.priceTexts.set(index, price);
    }
  }

  private indexOfSku(sku: string): number | undefined {
    const prefix = `${this.supplier.toUpperCase()}-`;
    if (!sku.startsWith(prefix) || !/^\d+$/.test(sku.slice(prefix.length))) return undefined;
    const index = Number(sku.slice(prefix.length));
    return index < this.nextIndex && skuOf(this.supplier, index) === sku ? index : undefined;
  }

  changePrices(k: number): void {
    if (this.live === 0) return;
    for (let i = 0; i < k; i++) {
      const index = this.indexAt(this.priceCursor % this.live);
      this.versions.set(index, (this.versions.get(index) ?? 0) + 1);
      this.priceTexts.delete(index);
      this.priceCursor = (this.priceCursor + 1) % this.live;
    }
  }

  /** Changes the stock of the next `k` live offers, in a rotating order starting at the catalog's end. */
  changeStock(k: number): void {
    if (this.live === 0) return;
    for (let i = 0; i < k; i++) {
      const index = this.indexAt(this.live - 1 - (this.stockCursor % this.live));
      this.stockVersions.set(index, (this.stockVersions.get(index) ?? 0) + 1);
      this.stockCursor = (this.stockCursor + 1) % this.live;
    }
  }

  remove(k: number): void {
    let left = Math.min(k, this.live);
    this.live -= left;
    while (left > 0) {
      const last = this.segments[this.segments.length - 1]!;
      const take = Math.min(left, last[1] - last[0]);
      last[1] -= take;
      left -= take;
      if (last[1] === last[0]) this.segments.pop();
    }
    if (this.live > 0) {
      this.priceCursor %= this.live;
      this.stockCursor %= this.live;
    } else {
      this.priceCursor = 0;
      this.stockCursor = 0;
    }
  }

  add(k: number): void {
    if (k <= 0) return;
    const last = this.segments[this.segments.length - 1];
    if (last && last[1] === this.nextIndex) last[1] += k;
    else this.segments.push([this.nextIndex, this.nextIndex + k]);
    this.nextIndex += k;
    this.live += k;
  }

  /** True once offer `index` has had a price change (`changePrices` or `setPrices`). */
  priceChanged(index: number): boolean {
    return this.versions.has(index) || this.priceTexts.has(index);
  }

  /** Offer index at live `position` (0 ≤ position < liveCount). */
  indexAt(position: number): number {
    let p = position;
    for (const [start, end] of this.segments) {
      if (p < end - start) return start + p;
      p -= end - start;
    }
    throw new RangeError(`position ${position} out of range (live ${this.live})`);
  }

  /** Live position of the offer with this SKU, or -1 (Stripe-style `starting_after`). */
  positionOf(sku: string): number {
    const dash = sku.lastIndexOf("-");
    const index = Number(sku.slice(dash + 1));
    if (dash < 0 || !Number.isInteger(index) || skuOf(this.supplier, index) !== sku) return -1;
    let position = 0;
    for (const [start, end] of this.segments) {
      if (index >= start && index < end) return position + index - start;
      position += end - start;
    }
    return -1;
  }

  /** Records at positions [from, to), clamped to the live catalog. */
  slice(from: number, to: number): SimulatorRecord[] {
    const out: SimulatorRecord[] = [];
    const end = Math.min(to, this.live);
    if (from >= end) return out;
    // Walk the segments once instead of resolving each position separately.
    let skip = from;
    let remaining = end - from;
    for (const [start, stop] of this.segments) {
      const len = stop - start;
      if (skip >= len) {
        skip -= len;
        continue;
      }
      for (let i = start + skip; i < stop && remaining > 0; i++, remaining--) out.push(this.recordOf(i));
      skip = 0;
      if (remaining === 0) break;
    }
    return out;
  }

  /** Stock of offer `index`: from its hash, moved by a non-zero step per `changeStock` version. */
  private stockOf(index: number, base: number): number {
    let stock = mix(base ^ 0x5bd1e995) % 1000;
    const version = this.stockVersions.get(index) ?? 0;
    for (let v = 1; v <= version; v++) stock = (stock + 1 + (hash3(this.seed, index, 1_000 + v) % 50)) % 1000;
    return stock;
  }

  /** The valid record of offer `index` at its current price version. */
  recordOf(index: number): SimulatorRecord {
    const version = this.versions.get(index) ?? 0;
    const base = hash3(this.seed, index, 0);
    // Each version moves the price by a non-zero step (mod the range), so a change is always visible.
    let cents = base % 99_900;
    for (let v = 1; v <= version; v++) cents = (cents + 1 + (hash3(this.seed, index, v) % 500)) % 99_900;
    cents += 100;
    const value =
      this.priceTexts.get(index) ?? `${Math.floor(cents / 100)}.${String(cents % 100).padStart(2, "0")}`;
    return {
      article: skuOf(this.supplier, index),
      title: `${this.label} offer ${index}`,
      price: { value, currency: this.currencies.get(index) ?? "EUR" },
      stock: { total: this.stockOf(index, base) },
    };
  }
}
