#!/usr/bin/env node
/**
 * `npm run bench:feeds`: the streaming feed layer (docs/feeds.md) on a YML feed of
 * 100,000 and 1,000,000 offers, gzip-compressed and in windows-1251, as the
 * simulator serves it (downloaded once to a temp file, so the simulator's CPU is not
 * in the measurement). Each file is walked, in a child process of its own:
 * - `feed`: `readFeed` (gunzip, iconv-lite, saxes, records built) + `normalizeRecords`
 *   with the YML fields, in steps of 5,000;
 * - `bare`: a bare stream-parse of the same file (gunzip + iconv-lite + saxes,
 *   counting `<offer>` open tags), the floor of any such reader.
 * - `pipeline`: the whole product on the same file: a worker child (bench/worker.ts:
 *   `buildApp` + a forced `--tick-once`) walks a connector with `format: xml` over
 *   loopback HTTP (the file served as is, by a static server in this process), the
 *   declarative connector streams it in steps of 5,000, and the tick validates,
 *   hashes and commits each step in PostgreSQL (`BENCH_DATABASE_URL`, else an
 *   embedded one): a first load of every offer.
 * Reported: rows/s of all three (same run, same machine), `feed` and `pipeline` as a
 * fraction of `bare`, and each child's peak RSS (`peakRssKb`, bench/measure.ts);
 * the children run with the image's heap flags (bench/node-flags.ts). Targets, for
 * `feed` and `pipeline` alike: peak RSS ≤ 160 MB, and the 1M walk's within 20 % of
 * the 100k walk's.
 *
 * Workbooks: bench/workbooks.ts, run after, with the same sizes (an xlsx read by the
 * reader and by a bare parse; target: the 1M walk's peak RSS within 20 % of the 100k's).
 *
 * Usage: node dist/bench/feeds.js [--sizes 100000,1000000] [--no-pipeline] [--no-workbooks] [--ci]
 * (--ci: exit 1 when a target is missed)
 */
import { spawn } from "node:child_process";
import { createReadStream, createWriteStream, mkdirSync, statSync, writeFileSync } from "node:fs";
import { mkdtemp, rm, stat } from "node:fs/promises";
import { createServer, type Server } from "node:http";
import type { AddressInfo } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { pipeline } from "node:stream/promises";
import { fileURLToPath } from "node:url";
import { createGunzip } from "node:zlib";
import iconv from "iconv-lite";
import { SaxesParser } from "saxes";
import { normalizeRecords } from "../internal/connectors/records/normalize.js";
import { formatSchema } from "../internal/feeds/format-schema.js";
import { readFeed } from "../internal/feeds/read-feed.js";
import { runMain } from "./child-main.js";
import { peakRssKb } from "./measure.js";
import { heapFlags } from "./node-flags.js";

// The children measure their peak RSS: the parent's modules (simulator, undici) are
// imported only by the parent, so they are not in the figures.
const RSS_TARGET_MB = 160;
const RSS_GROWTH_TARGET = 0.2;
const FIELDS = { sku: "@id", price: "price", currency: "currencyId", name: "name" };

interface WalkReport {
  mode: "feed" | "bare";
  rows: number;
  rejects: number;
  ms: number;
  rowsPerSecond: number;
  maxRssMB: number;
}

function option(argv: string[], flag: string): string | undefined {
  const i = argv.indexOf(flag);
  return i >= 0 ? argv[i + 1] : undefined;
}

const maxRssMB = () => Math.round((peakRssKb() / 1024) * 10) / 10;

async function walkFeed(file: string): Promise<WalkReport> {
  const started = performance.now();
  const format = formatSchema.parse({ type: "xml", element: "offer" });
  let rows = 0;
  let rejects = 0;
  for await (const batch of readFeed(createReadStream(file), { format, maxBytes: 4 * 1024 ** 3 })) {
    const normalized = normalizeRecords(batch.records, FIELDS);
    rows += normalized.offers.length;
    rejects += normalized.rejects.length + batch.rejects.length;
  }
  const ms = performance.now() - started;
  return {
    mode: "feed",
    rows,
    rejects,
    ms: Math.round(ms),
    rowsPerSecond: Math.round(rows / (ms / 1000)),
    maxRssMB: maxRssMB(),
  };
}

async function walkBare(file: string): Promise<WalkReport> {
  const started = performance.now();
  const parser = new SaxesParser({ xmlns: false, position: true });
  let rows = 0;
  parser.on("opentag", (tag) => {
    if (tag.name === "offer") rows++;
  });
  const text = createReadStream(file).pipe(createGunzip()).pipe(iconv.decodeStream("windows-1251"));
  for await (const chunk of text as AsyncIterable<string>) parser.write(chunk);
  parser.close();
  const ms = performance.now() - started;
  return {
    mode: "bare",
    rows,
    rejects: 0,
    ms: Math.round(ms),
    rowsPerSecond: Math.round(rows / (ms / 1000)),
    maxRssMB: maxRssMB(),
  };
}

function runChild(mode: "feed" | "bare", file: string): Promise<WalkReport> {
  return new Promise((resolve, reject) => {
    const child = spawn(
      process.execPath,
      [...heapFlags(), fileURLToPath(import.meta.url), "--child", mode, file],
      {
        stdio: ["ignore", "pipe", "inherit"],
      },
    );
    let out = "";
    child.stdout.on("data", (c: Buffer) => {
      out += c.toString();
    });
    child.on("error", reject);
    child.on("close", (code) => {
      if (code !== 0) reject(new Error(`bench child ${mode} exited ${code}`));
      else resolve(JSON.parse(out.trim().split("\n").at(-1) ?? "null") as WalkReport);
    });
  });
}

interface PipelineReport {
  rows: number;
  tickMs: number;
  rowsPerSecond: number;
  maxRssMB: number;
  pages: number;
  unchanged: number;
}

/**
 * Serves the files of `dir` as they are (gzip bytes, no Content-Encoding), as a feed host
 * would: with an `ETag` (name, size, mtime), answering `If-None-Match` with 304. Counts
 * the answers per file and status.
 */
async function serveFiles(
  dir: string,
): Promise<{ server: Server; url: string; answers: Map<string, Record<number, number>> }> {
  const answers = new Map<string, Record<number, number>>();
  const count = (name: string, status: number) => {
    const byStatus = answers.get(name) ?? {};
    byStatus[status] = (byStatus[status] ?? 0) + 1;
    answers.set(name, byStatus);
  };
  const server = createServer((req, res) => {
    const name = (req.url ?? "/").slice(1);
    if (!/^[\w.-]+$/.test(name)) {
      res.writeHead(404).end();
      return;
    }
    const info = statSync(join(dir, name));
    const etag = `"${name}-${info.size}-${info.mtimeMs}"`;
    if (req.headers["if-none-match"] === etag) {
      count(name, 304);
      res.writeHead(304, { etag }).end();
      return;
    }
    count(name, 200);
    res.writeHead(200, { "content-type": "application/gzip", etag });
    pipeline(createReadStream(join(dir, name)), res).catch(() => res.destroy());
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  return { server, url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`, answers };
}

/** One forced tick of the whole app over `fileUrl`: connector → tick → PostgreSQL, in a worker child. */
async function walkPipeline(
  databaseUrl: string,
  dir: string,
  supplier: string,
  baseUrl: string,
  path: string,
) {
  const { runWorker } = await import("./child.js");
  const connectors = join(dir, `connectors-${supplier}`);
  mkdirSync(connectors, { recursive: true });
  writeFileSync(
    join(connectors, `${supplier}.json`),
    JSON.stringify({
      baseUrl,
      request: { path },
      format: { type: "xml", element: "offer" },
      fields: FIELDS,
    }),
  );
  const report = await runWorker(
    {
      SUPPLIER_SYNC_SUPPLIERS: `${supplier}:1h`,
      DATABASE_URL: databaseUrl,
      SUPPLIER_SYNC_CONNECTORS_DIR: connectors,
      SUPPLIER_SYNC_LOG_LEVEL: "warn",
      SUPPLIER_SYNC_HTTP_ADDR: "127.0.0.1:0",
    },
    1_800_000,
  );
  const result = report.results[0];
  if (result?.outcome !== "success") throw new Error(`pipeline ${supplier}: tick outcome ${result?.outcome}`);
  const counts = result.counts as { seen?: number; pages?: number; unchanged?: number } | undefined;
  const rows = counts?.seen ?? 0;
  return {
    rows,
    tickMs: Math.round(report.tickMs),
    rowsPerSecond: Math.round(rows / (report.tickMs / 1000)),
    maxRssMB: Math.round((report.maxRssKb / 1024) * 10) / 10,
    pages: counts?.pages ?? 0,
    unchanged: counts?.unchanged ?? 0,
  } satisfies PipelineReport;
}

async function download(url: string, file: string): Promise<void> {
  const { request } = await import("undici");
  const res = await request(url);
  if (res.statusCode !== 200) throw new Error(`GET ${url}: ${res.statusCode}`);
  await pipeline(res.body, createWriteStream(file));
}

/** bench/workbooks.ts in a child process of its own (it spawns its walks' children itself). */
function runWorkbookBench(
  sizes: number[],
): Promise<{ targets: { largestWithin20PercentOfSmallest: boolean } }> {
  return new Promise((resolve, reject) => {
    const script = fileURLToPath(new URL("./workbooks.js", import.meta.url));
    const child = spawn(process.execPath, [script, "--sizes", sizes.join(",")], {
      stdio: ["ignore", "pipe", "inherit"],
    });
    let out = "";
    child.stdout.on("data", (c: Buffer) => {
      out += c.toString();
    });
    child.on("error", reject);
    child.on("close", (code) => {
      if (code !== 0) reject(new Error(`bench/workbooks exited ${code}`));
      else resolve(JSON.parse(out.trim().split("\n").pop() as string));
    });
  });
}

async function main(): Promise<unknown> {
  const argv = process.argv.slice(2);
  const child = option(argv, "--child");
  if (child === "feed" || child === "bare") {
    const file = argv[argv.indexOf("--child") + 2]!;
    return child === "feed" ? walkFeed(file) : walkBare(file);
  }
  const sizes = (option(argv, "--sizes") ?? "100000,1000000").split(",").map(Number);
  const dir = await mkdtemp(join(tmpdir(), "bench-feeds-"));
  try {
    const files: { offers: number; file: string; bytes: number }[] = [];
    const { startSimulator } = await import("../internal/simulator/server.js");
    const sim = await startSimulator({
      suppliers: Object.fromEntries(sizes.map((n) => [`yml${n}`, { size: n }])),
    });
    try {
      for (const offers of sizes) {
        const file = join(dir, `yml-${offers}.xml.gz`);
        await download(`${sim.baseUrl(`yml${offers}`)}/feed.yml?compress=gzip&encoding=windows-1251`, file);
        files.push({ offers, file, bytes: (await stat(file)).size });
      }
    } finally {
      await sim.close();
    }
    const withPipeline = !argv.includes("--no-pipeline");
    const { openBenchDatabase } = await import("./database.js");
    const db = withPipeline ? await openBenchDatabase(process.env.BENCH_DATABASE_URL) : undefined;
    const host = withPipeline ? await serveFiles(dir) : undefined;
    const walks = [];
    try {
      for (const { offers, file, bytes } of files) {
        const bare = await runChild("bare", file);
        const feed = await runChild("feed", file);
        if (feed.rows !== offers || bare.rows !== offers) {
          throw new Error(
            `${offers} offers: feed read ${feed.rows} (${feed.rejects} rejects), bare counted ${bare.rows}`,
          );
        }
        const pipelined =
          db && host
            ? await walkPipeline(db.url, dir, `feed${offers}`, host.url, `/${file.split("/").pop()}`)
            : undefined;
        if (pipelined && pipelined.rows !== offers) {
          throw new Error(`${offers} offers: the pipeline saw ${pipelined.rows}`);
        }
        // The same feed again, unchanged: the run sends the first one's ETag back and gets a 304.
        const fileName = file.split("/").pop() as string;
        const again =
          db && host ? await walkPipeline(db.url, dir, `feed${offers}`, host.url, `/${fileName}`) : undefined;
        const unchanged =
          again && host
            ? {
                tickMs: again.tickMs,
                pages: again.pages,
                recordsUnchanged: again.unchanged,
                answers: host.answers.get(fileName) ?? {},
              }
            : undefined;
        walks.push({
          offers,
          gzipBytes: bytes,
          feed,
          bare,
          feedOfBare: Math.round((feed.rowsPerSecond / bare.rowsPerSecond) * 100) / 100,
          ...(pipelined
            ? {
                pipeline: pipelined,
                pipelineOfBare: Math.round((pipelined.rowsPerSecond / bare.rowsPerSecond) * 100) / 100,
              }
            : {}),
          ...(unchanged ? { unchanged } : {}),
        });
        process.stderr.write(
          `${offers} offers (${(bytes / 1024 / 1024).toFixed(1)} MB gzip): feed ${feed.rowsPerSecond} rows/s, peak RSS ${feed.maxRssMB} MB; bare ${bare.rowsPerSecond} rows/s, peak RSS ${bare.maxRssMB} MB${pipelined ? `; pipeline ${pipelined.rowsPerSecond} rows/s (${pipelined.pages} steps, ${pipelined.tickMs} ms), peak RSS ${pipelined.maxRssMB} MB` : ""}\n`,
        );
        if (unchanged) {
          process.stderr.write(
            `${offers} offers unchanged: ${JSON.stringify(unchanged.answers)} answers, ${unchanged.pages} steps, ${unchanged.tickMs} ms\n`,
          );
        }
      }
    } finally {
      host?.server.close();
      await db?.stop();
    }
    const small = walks[0]!;
    const large = walks[walks.length - 1]!;
    const rssGrowth = Math.round((large.feed.maxRssMB / small.feed.maxRssMB - 1) * 1000) / 1000;
    const pipelineRssGrowth =
      large.pipeline && small.pipeline
        ? Math.round((large.pipeline.maxRssMB / small.pipeline.maxRssMB - 1) * 1000) / 1000
        : undefined;
    const targets = {
      peakRssAtMost160MB: walks.every(
        (w) => w.feed.maxRssMB <= RSS_TARGET_MB && (w.pipeline?.maxRssMB ?? 0) <= RSS_TARGET_MB,
      ),
      largestWithin20PercentOfSmallest:
        rssGrowth <= RSS_GROWTH_TARGET && (pipelineRssGrowth ?? 0) <= RSS_GROWTH_TARGET,
      // Conditional requests: the unchanged feed's second run was one request, a 304, no step.
      unchangedFeedIsOneRequest: walks.every(
        (w) =>
          w.unchanged === undefined ||
          (w.unchanged.pages === 0 &&
            w.unchanged.recordsUnchanged === w.offers &&
            JSON.stringify(w.unchanged.answers) === JSON.stringify({ 200: 1, 304: 1 })),
      ),
    };
    // Workbooks (bench/workbooks.ts): an xlsx of the same sizes, read by the reader and by a bare parse.
    const workbooks = argv.includes("--no-workbooks") ? undefined : await runWorkbookBench(sizes);
    const report = {
      walks,
      rssGrowth,
      pipelineRssGrowth,
      ...(workbooks ? { workbooks } : {}),
      targets: {
        ...targets,
        ...(workbooks
          ? { xlsxLargestWithin20PercentOfSmallest: workbooks.targets.largestWithin20PercentOfSmallest }
          : {}),
      },
    };
    if (argv.includes("--ci") && !Object.values(report.targets).every(Boolean)) {
      process.stdout.write(`${JSON.stringify(report)}\n`);
      throw new Error(`bench:feeds target missed: ${JSON.stringify(report.targets)}`);
    }
    return report;
  } finally {
    await rm(dir, { recursive: true, force: true });
  }
}

runMain(main);
