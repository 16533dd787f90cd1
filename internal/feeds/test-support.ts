/**
 * Test helpers of the feed layer: a real loopback GET with undici (which, unlike
 * `fetch`, leaves Content-Encoding to the reader) and a drain of {@link readFeed}.
 */
import { Agent, request } from "undici";
import type { IngestionError } from "../platform/errors.js";
import { type FeedFormatInput, formatSchema } from "./format-schema.js";
import { type ReadFeedOptions, readFeed } from "./read-feed.js";
import type { FeedBatch, FeedReject } from "./types.js";

export interface FeedRead {
  status: number;
  headers: Record<string, string | string[] | undefined>;
  batches: FeedBatch[];
  records: unknown[];
  rejects: FeedReject[];
  error: IngestionError | undefined;
  ms: number;
}

/** GETs `url` on its own agent and reads the body with `format`; a read error is returned, not thrown. */
export async function fetchFeed(
  url: string,
  format: FeedFormatInput,
  extra: Partial<Omit<ReadFeedOptions, "format">> & { headers?: Record<string, string> } = {},
): Promise<FeedRead> {
  const agent = new Agent({ connections: 1 });
  const started = performance.now();
  try {
    const res = await request(url, { dispatcher: agent, headers: extra.headers ?? {} });
    const out: FeedRead = {
      status: res.statusCode,
      headers: res.headers,
      batches: [],
      records: [],
      rejects: [],
      error: undefined,
      ms: 0,
    };
    if (res.statusCode !== 200) {
      await res.body.dump();
      return out;
    }
    const header = (name: string) => {
      const v = res.headers[name];
      return Array.isArray(v) ? v.join(", ") : v;
    };
    try {
      for await (const batch of readFeed(res.body, {
        maxBytes: 4 * 1024 ** 3,
        contentEncoding: header("content-encoding"),
        contentType: header("content-type"),
        ...extra,
        format: formatSchema.parse(format),
      })) {
        out.batches.push(batch);
        out.records.push(...batch.records);
        out.rejects.push(...batch.rejects);
      }
    } catch (err) {
      out.error = err as IngestionError;
    }
    out.ms = performance.now() - started;
    return out;
  } finally {
    await agent.destroy();
  }
}
