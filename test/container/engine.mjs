/**
 * Container-engine helpers for the container test (run.mjs): pick `docker` or
 * `podman` (whichever can run containers), run its commands with a deadline, and
 * small utilities (free loopback port, bounded polling). No test logic here.
 */
import { spawn, spawnSync } from "node:child_process";

/**
 * The engine to use: `CONTAINER_ENGINE` if set, else the first of docker, podman whose
 * `info` answers (a docker CLI without a reachable daemon does not count).
 * @returns {string | undefined}
 */
export function pickEngine(env = process.env) {
  const candidates = env.CONTAINER_ENGINE ? [env.CONTAINER_ENGINE] : ["docker", "podman"];
  for (const bin of candidates) {
    const probe = spawnSync(bin, ["info"], { stdio: "ignore", timeout: 30_000 });
    if (probe.status === 0) return bin;
  }
  return undefined;
}

/**
 * Runs `engine ...args`, resolving with its exit code and output; kills it (SIGKILL)
 * once `timeoutMs` has passed and reports that as a failure.
 * @param {string} engine
 * @param {string[]} args
 * @param {{ timeoutMs?: number, echo?: boolean }} [opts] echo streams output to stderr (builds)
 * @returns {Promise<{ code: number | null, stdout: string, stderr: string, timedOut: boolean }>}
 */
export function runEngine(engine, args, opts = {}) {
  const { timeoutMs = 60_000, echo = false } = opts;
  return new Promise((resolve, reject) => {
    const child = spawn(engine, args, { stdio: ["ignore", "pipe", "pipe"] });
    let stdout = "";
    let stderr = "";
    let timedOut = false;
    child.stdout.on("data", (b) => {
      stdout += b;
      if (echo) process.stderr.write(b);
    });
    child.stderr.on("data", (b) => {
      stderr += b;
      if (echo) process.stderr.write(b);
    });
    const timer = setTimeout(() => {
      timedOut = true;
      child.kill("SIGKILL");
    }, timeoutMs);
    child.on("error", (err) => {
      clearTimeout(timer);
      reject(err);
    });
    child.on("close", (code) => {
      clearTimeout(timer);
      resolve({ code, stdout, stderr, timedOut });
    });
  });
}

/**
 * Like runEngine, but throws unless the command exits 0; returns trimmed stdout.
 * @param {string} engine
 * @param {string[]} args
 * @param {{ timeoutMs?: number, echo?: boolean }} [opts]
 */
export async function mustRun(engine, args, opts) {
  const r = await runEngine(engine, args, opts);
  if (r.code !== 0) {
    const why = r.timedOut ? "timed out" : `exited ${r.code}`;
    throw new Error(`${engine} ${args.join(" ")} ${why}\n${r.stderr.trim()}\n${r.stdout.trim()}`);
  }
  return r.stdout.trim();
}

// Host networking shares the host's ports: one free on 127.0.0.1 right now.
export { freePort } from "../support/pg-runtime.mjs";

/**
 * Polls `probe` every `everyMs` until it returns a truthy value, which is returned;
 * throws `what` (with the last error) after `timeoutMs`.
 * @template T
 * @param {string} what
 * @param {() => Promise<T>} probe
 * @param {{ timeoutMs: number, everyMs?: number }} opts
 * @returns {Promise<NonNullable<T>>}
 */
export async function waitFor(what, probe, { timeoutMs, everyMs = 250 }) {
  const deadline = Date.now() + timeoutMs;
  let last;
  for (;;) {
    try {
      const value = await probe();
      if (value) return value;
    } catch (err) {
      last = err;
    }
    if (Date.now() >= deadline) {
      const detail = last instanceof Error ? `: ${last.message}` : "";
      throw new Error(`timed out after ${timeoutMs} ms waiting for ${what}${detail}`);
    }
    await new Promise((r) => setTimeout(r, everyMs));
  }
}
