// The standalone simulator process (dist/internal/simulator/main.js, built by test/run.mjs).
import { type ChildProcess, spawn } from "node:child_process";
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { createInterface } from "node:readline";
import t from "tap";
import { parseArgs } from "./cli.js";
import { getJson } from "./test-support.js";

const MAIN = new URL("../../dist/internal/simulator/main.js", import.meta.url).pathname;

function startMain(args: string[]): ChildProcess {
  return spawn(process.execPath, [MAIN, ...args], { stdio: ["ignore", "pipe", "pipe"] });
}

/** The first stdout line, parsed; bounded. */
function firstLine(child: ChildProcess): Promise<Record<string, unknown>> {
  return new Promise((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error("no output within 10 s")), 10_000);
    createInterface({ input: child.stdout! }).once("line", (line) => {
      clearTimeout(timer);
      resolve(JSON.parse(line) as Record<string, unknown>);
    });
    child.once("exit", (code) => reject(new Error(`exited ${code} before printing`)));
  });
}

function exitCode(child: ChildProcess): Promise<number | null> {
  return new Promise((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error("no exit within 10 s")), 10_000);
    child.once("exit", (code) => {
      clearTimeout(timer);
      resolve(code);
    });
  });
}

t.test("serves the demo suppliers and exits 0 on SIGTERM", async (t) => {
  const child = startMain(["--port", "0"]);
  t.teardown(() => child.kill("SIGKILL"));
  const line = await firstLine(child);
  t.equal(line.msg, "simulator listening");
  t.match(line.url, /^http:\/\/127\.0\.0\.1:\d+$/);
  const url = line.url as string;
  const etm = await getJson(`${url}/etm/v1/offers?page=5`);
  t.equal(etm.json.data.items.length, 100, "etm: 500 offers, page pagination");
  const iek = await getJson(`${url}/iek/v1/offers`);
  t.equal(iek.json.data.items[0]?.article, "IEK-0000000");
  t.type(iek.json.next_cursor, "string", "iek: cursor pagination");
  child.kill("SIGTERM");
  t.equal(await exitCode(child), 0);
});

t.test("--config file replaces the demo suppliers; bad usage exits 2", async (t) => {
  const dir = mkdtempSync(join(tmpdir(), "simulator-main-"));
  t.teardown(() => rmSync(dir, { recursive: true, force: true }));
  const config = join(dir, "sim.json");
  writeFileSync(config, JSON.stringify({ suppliers: { acme: { size: 7, pagination: "none" } } }));
  const child = startMain(["--port", "0", "--config", config]);
  t.teardown(() => child.kill("SIGKILL"));
  const line = await firstLine(child);
  const url = line.url as string;
  t.equal((await getJson(`${url}/acme/v1/offers`)).json.data.items.length, 7);
  t.equal((await getJson(`${url}/etm/v1/offers`)).status, 404);
  child.kill("SIGINT");
  t.equal(await exitCode(child), 0);

  writeFileSync(config, JSON.stringify({ suppliers: { acme: { size: "many" } } }));
  t.equal(await exitCode(startMain(["--config", config])), 2, "invalid config");
  t.equal(await exitCode(startMain(["--port", "http"])), 2, "invalid port");
  t.equal(await exitCode(startMain(["--bogus", "1"])), 2, "unknown flag");
});

t.test("parseArgs", async (t) => {
  t.same(parseArgs([]), { port: 9465, host: "127.0.0.1", config: undefined });
  t.same(parseArgs(["--host", "0.0.0.0", "--port", "1234", "--config", "x.json"]), {
    port: 1234,
    host: "0.0.0.0",
    config: "x.json",
  });
  t.throws(() => parseArgs(["--port"]), /missing value/);
  t.equal(parseArgs(["--help"]).help, true);
});
