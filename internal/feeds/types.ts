/**
 * What a feed reader yields. A *batch* is one step's worth (docs/feeds.md): at
 * most `format.pageSize` items, records and rejects together, in file order
 * within each list.
 */

/** A record that could not be read; `raw` is what there was of it (a CSV line, a partial object). */
export interface FeedReject {
  reason: string;
  raw: unknown;
}

export interface FeedBatch {
  /** Raw records, to be mapped by the connector's field specs. */
  records: unknown[];
  rejects: FeedReject[];
}

/** Collects what a record reader reads until a batch is full. */
export class Collector {
  records: unknown[] = [];
  rejects: FeedReject[] = [];
  constructor(readonly pageSize: number) {}

  get size(): number {
    return this.records.length + this.rejects.length;
  }

  /** A batch is ready: the reader should yield so the consumer can take it. */
  get full(): boolean {
    return this.size >= this.pageSize;
  }

  /** Takes up to `pageSize` items, records first. */
  take(): FeedBatch {
    const n = this.pageSize;
    if (this.size <= n) {
      const batch = { records: this.records, rejects: this.rejects };
      this.records = [];
      this.rejects = [];
      return batch;
    }
    const records = this.records.length <= n ? this.records : this.records.slice(0, n);
    this.records = records === this.records ? [] : this.records.slice(n);
    const left = n - records.length;
    const rejects = this.rejects.slice(0, left);
    this.rejects = this.rejects.slice(left);
    return { records, rejects };
  }
}

/**
 * Reads records from decoded text into `out`, yielding (nothing) whenever `out`
 * is full and after each chunk, so the caller can cut batches. Throws
 * `IngestionError` for a file it cannot go on with.
 */
export type RecordReader = (
  text: AsyncIterable<string>,
  out: Collector,
) => AsyncGenerator<void, void, undefined>;

/** Records larger than this (in characters of text, roughly) are rejected instead of built. */
export const MAX_RECORD_CHARS = 1024 * 1024;

/** At most this many characters of a bad record are kept as its `raw`. */
export const MAX_RAW_CHARS = 4096;

export function clip(text: string): string {
  return text.length > MAX_RAW_CHARS ? `${text.slice(0, MAX_RAW_CHARS)}…` : text;
}
