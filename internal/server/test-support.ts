/**
 * Helpers for the health server's own tests: a loopback HTTP client, a raw socket
 * for malformed or slow requests, pools on dead and hung databases, and a
 * Prometheus text-format checker.
 */
import { request } from "node:http";
import net from "node:net";
import pg from "pg";
import { createLogger, type Logger } from "../platform/logger.js";
import { SecretRegistry } from "../platform/redact.js";

export interface Teardown {
  teardown(fn: () => unknown): void;
}

export interface Reply {
  status: number;
  headers: Record<string, string | string[] | undefined>;
  body: string;
}

/** One request on its own connection (no agent); bounded by `timeoutMs`. */
export function fetchLocal(
  port: number,
  path: string,
  options: { method?: string; host?: string; headers?: Record<string, string>; timeoutMs?: number } = {},
): Promise<Reply> {
  return new Promise((resolve, reject) => {
    const req = request(
      {
        host: options.host ?? "127.0.0.1",
        port,
        path,
        method: options.method ?? "GET",
        headers: options.headers,
        agent: false,
      },
      (res) => {
        const chunks: Buffer[] = [];
        res.on("data", (c: Buffer) => chunks.push(c));
        res.on("error", reject);
        res.on("end", () =>
          resolve({
            status: res.statusCode ?? 0,
            headers: res.headers,
            body: Buffer.concat(chunks).toString(),
          }),
        );
      },
    );
    req.setTimeout(options.timeoutMs ?? 5_000, () => req.destroy(new Error("client timeout")));
    req.on("error", reject);
    req.end();
  });
}

/** Writes `data` on a raw connection and collects what comes back until the server closes it. */
export function rawExchange(
  port: number,
  data: string,
  timeoutMs: number,
): Promise<{ text: string; closedByServer: boolean; elapsedMs: number }> {
  return new Promise((resolve, reject) => {
    const started = performance.now();
    const socket = net.connect({ host: "127.0.0.1", port });
    const chunks: Buffer[] = [];
    const timer = setTimeout(() => {
      socket.destroy();
      resolve({ text: Buffer.concat(chunks).toString(), closedByServer: false, elapsedMs: timeoutMs });
    }, timeoutMs);
    socket.on("data", (c: Buffer) => chunks.push(c));
    socket.on("error", (err) => {
      clearTimeout(timer);
      reject(err);
    });
    socket.on("close", () => {
      clearTimeout(timer);
      resolve({
        text: Buffer.concat(chunks).toString(),
        closedByServer: true,
        elapsedMs: performance.now() - started,
      });
    });
    socket.write(data);
  });
}

/** A logger whose lines tests can read. */
export function captureLogger(): { log: Logger; lines: () => Record<string, unknown>[] } {
  const raw: string[] = [];
  const log = createLogger({
    level: "debug",
    secrets: new SecretRegistry(),
    destination: { write: (s: string) => raw.push(s) },
  });
  return { log, lines: () => raw.map((l) => JSON.parse(l) as Record<string, unknown>) };
}

/** A pool on a loopback port where nothing listens: every query fails at once. */
export async function deadDatabasePool(t: Teardown): Promise<pg.Pool> {
  const port = await new Promise<number>((resolve, reject) => {
    const probe = net.createServer();
    probe.on("error", reject);
    probe.listen(0, "127.0.0.1", () => {
      const addr = probe.address() as net.AddressInfo;
      probe.close(() => resolve(addr.port));
    });
  });
  const pool = new pg.Pool({ connectionString: `postgres://nobody@127.0.0.1:${port}/none`, max: 2 });
  pool.on("error", () => {});
  t.teardown(() => pool.end());
  return pool;
}

/** A pool on a "database" that accepts connections and never answers. */
export async function hungDatabasePool(t: Teardown): Promise<pg.Pool> {
  const sockets = new Set<net.Socket>();
  const server = net.createServer((s) => {
    sockets.add(s);
    s.on("error", () => {});
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  const { port } = server.address() as net.AddressInfo;
  const pool = new pg.Pool({ connectionString: `postgres://nobody@127.0.0.1:${port}/none`, max: 2 });
  pool.on("error", () => {});
  t.teardown(async () => {
    for (const s of sockets) s.destroy();
    await new Promise<void>((resolve) => server.close(() => resolve()));
    await pool.end();
  });
  return pool;
}

/** One `succeeded` run of `supplier` finished at `finishedAt`, written directly. */
export async function insertSuccess(db: pg.Pool, supplier: string, finishedAt: Date): Promise<void> {
  await db.query(
    `insert into ingestion_runs (supplier, slot_start, trigger, state, owner, started_at, heartbeat_at, finished_at)
     values ($1, $2, 'schedule', 'succeeded', '{}'::jsonb, $2, $2, $2)`,
    [supplier, finishedAt],
  );
}

const METRIC_NAME = "[a-zA-Z_:][a-zA-Z0-9_:]*";
const LABEL = `[a-zA-Z_][a-zA-Z0-9_]*="(?:[^"\\\\\\n]|\\\\[\\\\"n])*"`;
// Values are read with Go's ParseFloat, which takes NaN and Inf in any case
// (prom-client writes "Nan").
const VALUE =
  "(?:[-+]?(?:[0-9]+(?:\\.[0-9]*)?|\\.[0-9]+)(?:[eE][-+]?[0-9]+)?|[nN][aA][nN]|[-+]?[iI][nN][fF](?:[iI][nN][iI][tT][yY])?)";
const SAMPLE = new RegExp(
  `^(${METRIC_NAME})(?:\\{(?:${LABEL}(?:,${LABEL})*,?)?\\})? ${VALUE}(?: -?[0-9]+)?$`,
);
const HELP = new RegExp(`^# HELP (${METRIC_NAME}) .*$`);
const TYPE = new RegExp(`^# TYPE (${METRIC_NAME}) (counter|gauge|histogram|summary|untyped)$`);
const SUFFIXES: Record<string, string[]> = {
  counter: [""],
  gauge: [""],
  untyped: [""],
  histogram: ["_bucket", "_sum", "_count"],
  summary: ["", "_sum", "_count"],
};

/**
 * Checks Prometheus text format 0.0.4 line by line: `# HELP`, `# TYPE`, and samples
 * `name{labels} value`, each sample belonging to the family last declared by TYPE.
 * Returns the problems found (empty when valid) and the declared families.
 */
export function checkPrometheusText(text: string): { problems: string[]; families: Map<string, string> } {
  const problems: string[] = [];
  const families = new Map<string, string>();
  let current: { name: string; type: string } | undefined;
  if (!text.endsWith("\n")) problems.push("text does not end with a newline");
  const lines = text.split("\n");
  lines.pop();
  for (const [i, line] of lines.entries()) {
    const where = `line ${i + 1}: ${line}`;
    if (line === "") continue;
    const help = HELP.exec(line);
    if (help) continue;
    const type = TYPE.exec(line);
    if (type) {
      const [, name, kind] = type as unknown as [string, string, string];
      if (families.has(name)) problems.push(`${where}: TYPE declared twice`);
      families.set(name, kind);
      current = { name, type: kind };
      continue;
    }
    if (line.startsWith("#")) {
      problems.push(`${where}: unknown comment`);
      continue;
    }
    const sample = SAMPLE.exec(line);
    if (!sample) {
      problems.push(`${where}: not a valid sample`);
      continue;
    }
    const name = sample[1] ?? "";
    const belongs =
      current !== undefined && (SUFFIXES[current.type] ?? [""]).some((s) => name === `${current?.name}${s}`);
    if (!belongs) problems.push(`${where}: sample outside its family (${current?.name ?? "none"})`);
  }
  return { problems, families };
}
