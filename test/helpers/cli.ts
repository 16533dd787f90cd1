import { type ChildProcess, spawn } from "node:child_process";
import { once } from "node:events";
import { fileURLToPath } from "node:url";
import type { Teardown } from "./db.js";

export const CLI = fileURLToPath(new URL("../../dist/cmd/supplier-sync/main.js", import.meta.url));

/** A supplier-sync process started from the built CLI, with its output collected. */
export interface CliProcess {
  readonly child: ChildProcess;
  readonly stdout: string[];
  readonly stderr: string[];
  /** Parsed JSON log lines so far. */
  logs(): Record<string, unknown>[];
  /** Resolves with the first log line matching, or rejects after `timeoutMs`. */
  waitForLog(
    match: (line: Record<string, unknown>) => boolean,
    timeoutMs?: number,
  ): Promise<Record<string, unknown>>;
  /** Resolves with the exit code (128 + n for a signal), or rejects after `timeoutMs`. */
  exited(timeoutMs?: number): Promise<number>;
}

/**
 * The lease the test processes use unless a test sets its own: `SUPPLIER_SYNC_TEST_LEASE`
 * (and `SUPPLIER_SYNC_TEST_LEASE_TTL`), set by the fault-suite runner to run every
 * scenario with each lease.
 */
export function testLease(): { lease: "advisory" | "table"; ttl: string | undefined } {
  return {
    lease: process.env.SUPPLIER_SYNC_TEST_LEASE === "table" ? "table" : "advisory",
    ttl: process.env.SUPPLIER_SYNC_TEST_LEASE_TTL,
  };
}

/** Minimal environment for a run: nothing of the caller's SUPPLIER_SYNC_* leaks in. */
export function baseEnv(extra: Record<string, string>): Record<string, string> {
  const env: Record<string, string> = {};
  for (const k of ["PATH", "HOME", "TMPDIR", "LANG"]) if (process.env[k]) env[k] = process.env[k] as string;
  const { lease, ttl } = testLease();
  if (lease === "table") {
    env.SUPPLIER_SYNC_LEASE = "table";
    if (ttl) env.SUPPLIER_SYNC_LEASE_TTL = ttl;
  }
  return { SUPPLIER_SYNC_HTTP_ADDR: "127.0.0.1:0", SUPPLIER_SYNC_LOG_LEVEL: "info", ...env, ...extra };
}

const SIGNALS: Record<string, number> = { SIGTERM: 15, SIGINT: 2, SIGKILL: 9 };

/**
 * Starts the built CLI. `wrap`: a command that runs it (e.g. `ip netns exec NS`, which
 * execs it in place, so the child's pid is the daemon's).
 */
export function startCli(
  t: Teardown,
  args: string[],
  env: Record<string, string>,
  wrap: string[] = [],
): CliProcess {
  const [command, ...prefix] = [...wrap, process.execPath];
  const child = spawn(command as string, [...prefix, CLI, ...args], {
    env,
    stdio: ["ignore", "pipe", "pipe"],
  });
  const stdout: string[] = [];
  const stderr: string[] = [];
  const waiters: {
    match: (l: Record<string, unknown>) => boolean;
    resolve: (l: Record<string, unknown>) => void;
  }[] = [];
  const parsed: Record<string, unknown>[] = [];
  let buffer = "";
  child.stdout?.setEncoding("utf8").on("data", (chunk: string) => {
    buffer += chunk;
    let nl = buffer.indexOf("\n");
    while (nl >= 0) {
      const line = buffer.slice(0, nl);
      buffer = buffer.slice(nl + 1);
      stdout.push(line);
      try {
        const obj = JSON.parse(line) as Record<string, unknown>;
        parsed.push(obj);
        for (const w of [...waiters]) {
          if (w.match(obj)) {
            waiters.splice(waiters.indexOf(w), 1);
            w.resolve(obj);
          }
        }
      } catch {
        // not a log line (e.g. check-config text)
      }
      nl = buffer.indexOf("\n");
    }
  });
  child.stderr?.setEncoding("utf8").on("data", (chunk: string) => stderr.push(chunk));
  const exit = once(child, "exit").then(([code, signal]) =>
    typeof code === "number" ? code : 128 + (SIGNALS[String(signal)] ?? 0),
  );
  t.teardown(() => {
    if (child.exitCode === null && child.signalCode === null) child.kill("SIGKILL");
  });
  return {
    child,
    stdout,
    stderr,
    logs: () => parsed,
    waitForLog(match, timeoutMs = 20_000) {
      const found = parsed.find(match);
      if (found) return Promise.resolve(found);
      return new Promise((resolve, reject) => {
        const timer = setTimeout(() => {
          reject(
            new Error(`no matching log line within ${timeoutMs} ms; stderr: ${stderr.join("").slice(-2000)}`),
          );
        }, timeoutMs);
        waiters.push({
          match,
          resolve: (l) => {
            clearTimeout(timer);
            resolve(l);
          },
        });
        exit.then(() => {
          setTimeout(() => {
            clearTimeout(timer);
            reject(
              new Error(`process exited before a matching log line; stderr: ${stderr.join("").slice(-2000)}`),
            );
          }, 50);
        });
      });
    },
    exited(timeoutMs = 60_000) {
      return Promise.race([
        exit,
        new Promise<number>((_, reject) =>
          setTimeout(
            () => reject(new Error(`process still running after ${timeoutMs} ms`)),
            timeoutMs,
          ).unref(),
        ),
      ]);
    },
  };
}

/** Runs the CLI to completion. */
export async function runCli(
  t: Teardown,
  args: string[],
  env: Record<string, string>,
  timeoutMs = 60_000,
): Promise<{ code: number; stdout: string; stderr: string; logs: Record<string, unknown>[] }> {
  const p = startCli(t, args, env);
  const code = await p.exited(timeoutMs);
  // let the last chunks of output arrive
  await new Promise((r) => setImmediate(r));
  return { code, stdout: p.stdout.join("\n"), stderr: p.stderr.join(""), logs: p.logs() };
}
