import type { IncomingMessage, ServerResponse } from "node:http";
import { PassThrough, pipeline, Readable } from "node:stream";
import { createBrotliCompress, createDeflate, createGzip } from "node:zlib";
import iconv from "iconv-lite";
import yazl from "yazl";
import { hashString } from "./catalog.js";
import { sendJson } from "./respond.js";
import type { SupplierState } from "./supplier.js";
import type { SimulatorRecord } from "./types.js";

/**
 * Whole-catalog feed files generated from a supplier's catalog (docs/feeds.md),
 * streamed in ~64 KiB pieces with back-pressure and never built whole:
 *
 * - `GET /<supplier>/feed.yml`: YML, `yml_catalog/shop/offers/offer` with
 *   `@id`, `@available`, `price`, `currencyId`, `name`;
 * - `GET /<supplier>/offers.xml`: CommerceML `Предложение` with `Ид`,
 *   `Наименование`, `Цены/Цена/ЦенаЗаЕдиницу`, `Количество`;
 * - `GET /<supplier>/feed.csv`: `;`-delimited, header `sku;name;price;currency;stock`;
 * - `GET /<supplier>/feed.jsonl`: one `{sku,name,price,currency,stock}` per line;
 * - `GET /<supplier>/feed.json`: `{"data":{"items":[…]}}`.
 *
 * Query options (all optional, combinable):
 * - `encoding`: `utf-8` (default), `windows-1251`, `koi8-r`, `iso-8859-1`, `utf-16le` (with a BOM);
 * - `declare`: the encoding named by the XML declaration and the `charset` (default: `encoding`;
 *   `none`: neither), to serve a file that lies about its encoding;
 * - `compress`: `gzip` (a .gz file, no Content-Encoding), `zip` (one entry, plus `readme.txt`
 *   with `zipExtra=1`), `content-gzip`, `content-deflate`, `content-br` (Content-Encoding);
 * - `truncate=N`: the body ends cleanly after N bytes (a cut file); `cut=N`: the socket is
 *   destroyed after N bytes (a broken transfer);
 * - `bomb=N`: a gzip of an XML document padded to N bytes of spaces (about 1000:1);
 * - `attack=billion-laughs|xxe`: a DOCTYPE declaring entities, used in the first offer's name;
 * - `malformed=P`: the offer at position P is written broken (CSV: a stray quote and an extra
 *   column; JSON lines: a cut line; XML: an undefined entity);
 * - `price=number` (JSON, JSON lines): prices as number literals of the same digits.
 *
 * Every 200 carries a strong `ETag` (a hash of the served content and the options) and a
 * `Last-Modified` (when that ETag was first served); `If-None-Match` / `If-Modified-Since`
 * that match answer 304.
 */

export const FEED_ROUTE = /^\/([^/]+)\/(feed\.yml|offers\.xml|feed\.csv|feed\.jsonl|feed\.json)$/;

type FeedKind = "yml" | "commerceml" | "csv" | "jsonl" | "json";

const KINDS: Record<string, FeedKind> = {
  "feed.yml": "yml",
  "offers.xml": "commerceml",
  "feed.csv": "csv",
  "feed.jsonl": "jsonl",
  "feed.json": "json",
};

const CONTENT_TYPES: Record<FeedKind, string> = {
  yml: "application/xml",
  commerceml: "application/xml",
  csv: "text/csv",
  jsonl: "application/x-ndjson",
  json: "application/json",
};

const ENCODINGS = new Set(["utf-8", "windows-1251", "koi8-r", "iso-8859-1", "utf-16le"]);
const COMPRESSIONS = new Set(["none", "gzip", "zip", "content-gzip", "content-deflate", "content-br"]);
const PIECE_CHARS = 64 * 1024;

interface FeedOptions {
  kind: FeedKind;
  encoding: string;
  declare: string | undefined;
  compress: string;
  zipExtra: boolean;
  truncate: number | undefined;
  cut: number | undefined;
  bomb: number | undefined;
  attack: "billion-laughs" | "xxe" | undefined;
  malformed: number | undefined;
  priceNumber: boolean;
}

class BadFeedRequest extends Error {}

function count(params: URLSearchParams, name: string): number | undefined {
  const v = params.get(name);
  if (v === null) return undefined;
  if (!/^\d+$/.test(v)) throw new BadFeedRequest(`${name} must be a non-negative integer`);
  return Number(v);
}

function parseOptions(file: string, params: URLSearchParams): FeedOptions {
  const kind = KINDS[file];
  if (!kind) throw new BadFeedRequest(`unknown feed ${file}`);
  const encoding = (params.get("encoding") ?? "utf-8").toLowerCase();
  if (!ENCODINGS.has(encoding))
    throw new BadFeedRequest(`encoding must be one of ${[...ENCODINGS].join(", ")}`);
  const declared = params.get("declare")?.toLowerCase();
  const compress = params.get("compress") ?? "none";
  if (!COMPRESSIONS.has(compress))
    throw new BadFeedRequest(`compress must be one of ${[...COMPRESSIONS].join(", ")}`);
  const attack = params.get("attack") ?? undefined;
  if (attack !== undefined && attack !== "billion-laughs" && attack !== "xxe") {
    throw new BadFeedRequest("attack must be billion-laughs or xxe");
  }
  return {
    kind,
    encoding,
    declare: declared === "none" ? undefined : (declared ?? encoding),
    compress,
    zipExtra: params.get("zipExtra") === "1",
    truncate: count(params, "truncate"),
    cut: count(params, "cut"),
    bomb: count(params, "bomb"),
    attack,
    malformed: count(params, "malformed"),
    priceNumber: params.get("price") === "number",
  };
}

function escapeXml(text: string): string {
  return text.replace(/[<>&"']/g, (c) => `&#${c.charCodeAt(0)};`);
}

/** A Cyrillic word in every name, so a wrong decoding shows. */
function nameOf(record: SimulatorRecord): string {
  return `${record.title} (товар)`;
}

function ymlOffer(r: SimulatorRecord, broken: boolean, attack: FeedOptions["attack"]): string {
  const name = attack === "billion-laughs" ? "&lol9;" : attack === "xxe" ? "&xxe;" : escapeXml(nameOf(r));
  return (
    `<offer id="${escapeXml(r.article)}" available="${r.stock.total > 0}"><price>${r.price.value}</price>` +
    `<currencyId>${r.price.currency}</currencyId><name>${broken ? `${name} &nbsp;` : name}</name></offer>\n`
  );
}

function commercemlOffer(r: SimulatorRecord, broken: boolean, attack: FeedOptions["attack"]): string {
  const name = attack === "billion-laughs" ? "&lol9;" : attack === "xxe" ? "&xxe;" : escapeXml(nameOf(r));
  return (
    `<Предложение><Ид>${escapeXml(r.article)}</Ид><Наименование>${broken ? `${name} &nbsp;` : name}</Наименование>` +
    `<Цены><Цена><Представление>${r.price.value} ${r.price.currency} за шт</Представление><ИдТипаЦены>retail</ИдТипаЦены>` +
    `<ЦенаЗаЕдиницу>${r.price.value}</ЦенаЗаЕдиницу><Валюта>${r.price.currency}</Валюта><Единица>шт</Единица>` +
    `<Коэффициент>1</Коэффициент></Цена></Цены><Количество>${r.stock.total}</Количество></Предложение>\n`
  );
}

function csvRow(r: SimulatorRecord, broken: boolean): string {
  if (broken)
    return `${r.article};${nameOf(r)} 12" screen;${r.price.value};${r.price.currency};${r.stock.total};extra\n`;
  return `${r.article};${nameOf(r)};${r.price.value};${r.price.currency};${r.stock.total}\n`;
}

function jsonRecord(r: SimulatorRecord, priceNumber: boolean): string {
  const price = priceNumber ? r.price.value : JSON.stringify(r.price.value);
  return `{"sku":${JSON.stringify(r.article)},"name":${JSON.stringify(nameOf(r))},"price":${price},"currency":"${r.price.currency}","stock":${r.stock.total}}`;
}

function doctype(options: FeedOptions, root: string): string {
  if (options.attack === "billion-laughs") {
    const lines = ['<!ENTITY lol "lol">'];
    for (let i = 1; i <= 9; i++) {
      const prev = i === 1 ? "lol" : `lol${i - 1}`;
      lines.push(`<!ENTITY lol${i} "${`&${prev};`.repeat(10)}">`);
    }
    return `<!DOCTYPE ${root} [\n${lines.join("\n")}\n]>\n`;
  }
  if (options.attack === "xxe") return `<!DOCTYPE ${root} [\n<!ENTITY xxe SYSTEM "file:///etc/passwd">\n]>\n`;
  return root === "yml_catalog" ? '<!DOCTYPE yml_catalog SYSTEM "shops.dtd">\n' : "";
}

function xmlDeclaration(options: FeedOptions): string {
  return options.declare
    ? `<?xml version="1.0" encoding="${options.declare}"?>\n`
    : '<?xml version="1.0"?>\n';
}

/** The document's text in pieces; offers are generated PIECE_CHARS at a time. */
async function* feedText(state: SupplierState, options: FeedOptions, date: string): AsyncGenerator<string> {
  const { kind } = options;
  if (options.bomb !== undefined) {
    yield `${xmlDeclaration(options)}<yml_catalog date="${date}"><shop><offers>`;
    const spaces = " ".repeat(PIECE_CHARS);
    for (let left = options.bomb; left > 0; left -= PIECE_CHARS)
      yield left >= PIECE_CHARS ? spaces : spaces.slice(0, left);
    yield "</offers></shop></yml_catalog>\n";
    return;
  }
  let head = "";
  let tail = "";
  if (kind === "yml") {
    head = `${xmlDeclaration(options)}${doctype(options, "yml_catalog")}<yml_catalog date="${date}">\n<shop><name>${escapeXml(state.name)}</name><company>Симулятор</company>\n<currencies><currency id="EUR" rate="1"/></currencies>\n<offers>\n`;
    tail = "</offers>\n</shop>\n</yml_catalog>\n";
  } else if (kind === "commerceml") {
    head = `${xmlDeclaration(options)}${doctype(options, "КоммерческаяИнформация")}<КоммерческаяИнформация ВерсияСхемы="2.05" ДатаФормирования="${date}">\n<ПакетПредложений СодержитТолькоИзменения="false"><Ид>${escapeXml(state.name)}</Ид><Наименование>Пакет предложений</Наименование>\n<ТипыЦен><ТипЦены><Ид>retail</Ид><Наименование>Розничная</Наименование><Валюта>EUR</Валюта></ТипЦены></ТипыЦен>\n<Предложения>\n`;
    tail = "</Предложения>\n</ПакетПредложений>\n</КоммерческаяИнформация>\n";
  } else if (kind === "csv") head = "sku;name;price;currency;stock\n";
  else if (kind === "json") {
    head = '{"data":{"items":[';
    tail = "]}}\n";
  }
  yield head;
  const catalog = state.catalog;
  const live = catalog.liveCount;
  const batch = 500;
  let piece = "";
  for (let from = 0; from < live; from += batch) {
    const records = catalog.slice(from, from + batch);
    for (let i = 0; i < records.length; i++) {
      const r = records[i]!;
      const position = from + i;
      const broken = position === options.malformed;
      const attack = position === 0 ? options.attack : undefined;
      if (kind === "yml") piece += ymlOffer(r, broken, attack);
      else if (kind === "commerceml") piece += commercemlOffer(r, broken, attack);
      else if (kind === "csv") piece += csvRow(r, broken);
      else if (kind === "jsonl")
        piece += broken ? `{"sku":"${r.article}","price":\n` : `${jsonRecord(r, options.priceNumber)}\n`;
      else piece += `${position > 0 ? "," : ""}${jsonRecord(r, options.priceNumber)}`;
    }
    if (piece.length >= PIECE_CHARS) {
      yield piece;
      piece = "";
    }
  }
  yield piece + tail;
}

async function* encode(text: AsyncIterable<string>, encoding: string): AsyncGenerator<Buffer> {
  let first = true;
  for await (const piece of text) {
    // A UTF-16 file carries its BOM: without it nothing could tell its encoding.
    yield iconv.encode(piece, encoding, { addBOM: first && encoding === "utf-16le" });
    first = false;
  }
}

/** At most `limit` bytes of `source`; then a clean end, or (`fail`) an error that destroys the socket. */
async function* limit(source: AsyncIterable<Buffer>, max: number, fail: boolean): AsyncGenerator<Buffer> {
  let left = max;
  for await (const chunk of source) {
    if (chunk.length >= left) {
      if (left > 0) yield chunk.subarray(0, left);
      if (fail) throw new Error("simulated broken transfer");
      return;
    }
    left -= chunk.length;
    yield chunk;
  }
}

function entryName(kind: FeedKind): string {
  return kind === "yml" ? "feed.yml" : kind === "commerceml" ? "offers.xml" : `feed.${kind}`;
}

function compressed(
  bytes: AsyncIterable<Buffer>,
  options: FeedOptions,
): { body: Readable; encoding?: string } {
  const source = Readable.from(bytes);
  const through = (t: NodeJS.ReadWriteStream) => pipeline(source, t, () => {}) as unknown as Readable;
  const compress = options.bomb !== undefined && options.compress === "none" ? "gzip" : options.compress;
  switch (compress) {
    case "gzip":
      return { body: through(createGzip()) };
    case "content-gzip":
      return { body: through(createGzip()), encoding: "gzip" };
    case "content-deflate":
      return { body: through(createDeflate()), encoding: "deflate" };
    case "content-br":
      return { body: through(createBrotliCompress()), encoding: "br" };
    case "zip": {
      const zip = new yazl.ZipFile();
      zip.addReadStream(source, entryName(options.kind));
      if (options.zipExtra) zip.addBuffer(Buffer.from("Прайс-лист\n"), "readme.txt");
      zip.end();
      return { body: zip.outputStream.pipe(new PassThrough()) };
    }
    default:
      return { body: source };
  }
}

/** A strong ETag of what would be served: every live offer's SKU, price and stock, and the options. */
export function contentTag(state: SupplierState, query: string): string {
  let h = hashString(query);
  const catalog = state.catalog;
  const live = catalog.liveCount;
  for (let from = 0; from < live; from += 1000) {
    for (const r of catalog.slice(from, from + 1000)) {
      h = Math.imul(h ^ hashString(`${r.article}|${r.price.value}|${r.stock.total}`), 0x01000193) >>> 0;
    }
  }
  return `"${live.toString(16)}-${h.toString(16)}"`;
}

/** ETag → when it was first served, per supplier and request (the simulator's Last-Modified). */
const firstServed = new WeakMap<SupplierState, Map<string, { etag: string; at: number }>>();

export function validators(
  state: SupplierState,
  key: string,
  etag: string,
  now: number,
): { etag: string; lastModified: number } {
  let map = firstServed.get(state);
  if (!map) {
    map = new Map();
    firstServed.set(state, map);
  }
  let seen = map.get(key);
  if (!seen || seen.etag !== etag) {
    seen = { etag, at: Math.floor(now / 1000) * 1000 };
    map.set(key, seen);
  }
  return { etag, lastModified: seen.at };
}

export function notModified(req: IncomingMessage, etag: string, lastModified: number): boolean {
  const inm = req.headers["if-none-match"];
  if (inm !== undefined) {
    return inm
      .split(",")
      .map((t) => t.trim().replace(/^W\//, ""))
      .some((t) => t === "*" || t === etag);
  }
  const ims = req.headers["if-modified-since"];
  if (ims === undefined) return false;
  const since = Date.parse(ims);
  return Number.isFinite(since) && lastModified <= since;
}

/** Answers an admitted, authorised feed request (`file` is the matched feed file name). */
export async function serveFeed(
  state: SupplierState,
  req: IncomingMessage,
  res: ServerResponse,
  file: string,
  url: URL,
  now: () => number,
): Promise<void> {
  const stats = state.stats;
  let options: FeedOptions;
  try {
    options = parseOptions(file, url.searchParams);
  } catch (err) {
    if (!(err instanceof BadFeedRequest)) throw err;
    sendJson(res, stats, 400, { error: err.message });
    return;
  }
  const arrivedAt = now();
  const query = [...url.searchParams].sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0)).join("&");
  const { etag, lastModified } = validators(
    state,
    `${file}?${query}`,
    contentTag(state, `${file}?${query}`),
    arrivedAt,
  );
  const lastModifiedText = new Date(lastModified).toUTCString();
  if (notModified(req, etag, lastModified)) {
    stats.recordStatus(304);
    res.writeHead(304, { etag, "last-modified": lastModifiedText });
    res.end();
    return;
  }
  const bytes = encode(feedText(state, options, new Date(arrivedAt).toISOString()), options.encoding);
  let limited: AsyncIterable<Buffer> = bytes;
  const { body, encoding } = compressed(bytes, options);
  limited = body as AsyncIterable<Buffer>;
  if (options.truncate !== undefined) limited = limit(limited, options.truncate, false);
  if (options.cut !== undefined) limited = limit(limited, options.cut, true);
  const type =
    options.compress === "gzip" || options.bomb !== undefined
      ? "application/gzip"
      : options.compress === "zip"
        ? "application/zip"
        : `${CONTENT_TYPES[options.kind]}${options.declare ? `; charset=${options.declare}` : ""}`;
  const headers: Record<string, string> = { "content-type": type, etag, "last-modified": lastModifiedText };
  if (encoding) headers["content-encoding"] = encoding;
  stats.recordStatus(200);
  stats.startWalk(arrivedAt);
  res.writeHead(200, headers);
  await new Promise<void>((resolve) => {
    pipeline(Readable.from(limited), res, (err) => {
      if (err) res.destroy();
      else stats.completeWalk(now());
      resolve();
    });
  });
}
