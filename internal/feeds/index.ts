/** The streaming feed layer (docs/feeds.md): `format` schema and {@link readFeed}. */
export {
  DEFAULT_FEED_PAGE_SIZE,
  FEED_ENCODINGS,
  type FeedEncoding,
  type FeedFormat,
  type FeedFormatInput,
  feedMaxBytes,
  formatSchema,
  isStreamedFormat,
  MAX_DECOMPRESSION_RATIO,
  STREAMED_MAX_RESPONSE_BYTES,
} from "./format-schema.js";
export { type FeedReadStats, type ReadFeedOptions, readFeed } from "./read-feed.js";
export type { FeedBatch, FeedReject } from "./types.js";
