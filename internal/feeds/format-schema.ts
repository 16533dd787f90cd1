import { z } from "zod";

/**
 * The `format` key of a connector definition (docs/feeds.md): how a response
 * body is read. Every variant is a strict object, so an unknown key (or a CSV
 * key on an XML feed) is refused with the key path in the message, e.g.
 * `format.delimiter: Unrecognized key`.
 */

/** Encodings a feed may be declared in; `auto` sniffs BOM, XML declaration, `charset`, else UTF-8. */
export const FEED_ENCODINGS = ["auto", "utf-8", "windows-1251", "koi8-r", "iso-8859-1", "utf-16le"] as const;
export type FeedEncoding = (typeof FEED_ENCODINGS)[number];

/** Default records per step of a streamed format. */
export const DEFAULT_FEED_PAGE_SIZE = 5_000;
/** `maxResponseBytes` of a streamed format when the definition sets none: bounds the decompressed stream. */
export const STREAMED_MAX_RESPONSE_BYTES = 4 * 1024 ** 3;
/** A decompressed stream more than this many times larger than its compressed input is refused (`CONTRACT`). */
export { MAX_DECOMPRESSION_RATIO } from "../platform/content-encoding.js";

const FORMAT_TYPES = ["json", "jsonl", "csv", "xml", "xlsx", "xls"] as const;
/** `maxResponseBytes` of an `xls` workbook (read whole) when the definition sets none. */
export const XLS_MAX_RESPONSE_BYTES = 100 * 1024 ** 2;

const common = {
  /** A zip archive's entry to read: a name or a glob (`*.xml`); default: its only file. */
  zipEntry: z.string().min(1, "must not be empty").max(1_000).optional(),
  encoding: z.enum(FEED_ENCODINGS, { error: `must be one of ${FEED_ENCODINGS.join(", ")}` }).default("auto"),
  /** Records per step. */
  pageSize: z
    .number({ error: "must be a number" })
    .int("must be an integer")
    .min(1, "must be at least 1")
    .max(100_000, "must be at most 100000")
    .default(DEFAULT_FEED_PAGE_SIZE),
};

const oneCharacter = z
  .string({ error: "must be a string" })
  .length(1, "must be exactly one character")
  .refine((c) => c !== "\n" && c !== "\r", "must not be a line break");

const jsonFormat = z.strictObject({
  type: z.literal("json"),
  /** Parse the array at `records.path` incrementally instead of the whole body. */
  stream: z.boolean({ error: "must be true or false" }).default(false),
  ...common,
});

const jsonlFormat = z.strictObject({ type: z.literal("jsonl"), ...common });

const csvFormat = z
  .strictObject({
    type: z.literal("csv"),
    delimiter: oneCharacter.default(","),
    quote: oneCharacter.default('"'),
    /** True: records are objects keyed by the header row; false: keyed "0", "1", … */
    header: z.boolean({ error: "must be true or false" }).default(true),
    /** Lines skipped before the header (or the first record). */
    skipLines: z.number({ error: "must be a number" }).int("must be an integer").min(0).default(0),
    ...common,
  })
  .superRefine((f, ctx) => {
    if (f.delimiter === f.quote) {
      ctx.addIssue({ code: "custom", path: ["quote"], message: "must differ from delimiter" });
    }
  });

const xmlFormat = z.strictObject({
  type: z.literal("xml"),
  /** The record element: `offer` (YML), `Предложение` (CommerceML). */
  element: z
    .string({ error: "is required: the name of the record element, e.g. offer" })
    .regex(/^[^\s<>&"'/=]+$/, "must be an XML element name"),
  ...common,
});

/** `xlsx` and `xls` (docs/feeds.md, Workbooks): the sheet, where its header is, flat records. */
const workbookKeys = {
  /** A sheet name, or a 1-based index. */
  sheet: z
    .union([
      z.string().trim().min(1, "must not be empty"),
      z.number().int("must be an integer").min(1, "must be at least 1"),
    ])
    .default(1),
  /** A 1-based row number, or `auto`: the first row among the first 50 holding every mapped column. */
  headerRow: z
    .union([z.literal("auto"), z.number().int("must be an integer").min(1, "must be at least 1")], {
      error: 'must be "auto" or a row number (1-based)',
    })
    .default("auto"),
  /** True: records keyed by the header's texts; false: keyed by column letter `A`, `B`, … */
  header: z.boolean({ error: "must be true or false" }).default(true),
  zipEntry: common.zipEntry,
  pageSize: common.pageSize,
};

const xlsxFormat = z.strictObject({ type: z.literal("xlsx"), ...workbookKeys });
const xlsFormat = z.strictObject({ type: z.literal("xls"), ...workbookKeys });

/**
 * The `format` key. `type` defaults to `json` (the body parsed whole) when absent.
 * Parsed output is {@link FeedFormat}.
 */
export const formatSchema = z.preprocess(
  (value) =>
    value !== null && typeof value === "object" && !Array.isArray(value) && !("type" in value)
      ? { ...value, type: "json" }
      : value,
  z.discriminatedUnion("type", [jsonFormat, jsonlFormat, csvFormat, xmlFormat, xlsxFormat, xlsFormat], {
    error: (issue) =>
      issue.code === "invalid_union" ? `must be one of ${FORMAT_TYPES.join(", ")}` : undefined,
  }),
);

export type FeedFormat = z.output<typeof formatSchema>;
export type FeedFormatInput = z.input<typeof formatSchema>;
export type CsvFormat = z.output<typeof csvFormat>;
export type XmlFormat = z.output<typeof xmlFormat>;
export type JsonFormat = z.output<typeof jsonFormat>;
export type WorkbookFormat = z.output<typeof xlsxFormat> | z.output<typeof xlsFormat>;

/** Records are flat (csv, xlsx, xls): a field path names a column's header text as a whole, never split at dots. */
export function isFlatFormat(format: FeedFormat): boolean {
  return format.type === "csv" || format.type === "xlsx" || format.type === "xls";
}

/** `xlsx` or `xls`: records are flat rows of a sheet, keyed by normalised header text. */
export function isWorkbookFormat(format: FeedFormat): format is WorkbookFormat {
  return format.type === "xlsx" || format.type === "xls";
}

/** True when the format is read as a stream of steps (no pagination, partitions or SKU lists). */
export function isStreamedFormat(format: FeedFormat): boolean {
  return format.type !== "json" || format.stream;
}

/** The `maxResponseBytes` in force: the definition's when it sets one, else 4 GiB for a streamed format. */
export function feedMaxBytes(format: FeedFormat, configured: number | undefined, fallback: number): number {
  if (configured !== undefined) return configured;
  if (format.type === "xls") return XLS_MAX_RESPONSE_BYTES;
  return isStreamedFormat(format) ? STREAMED_MAX_RESPONSE_BYTES : fallback;
}
