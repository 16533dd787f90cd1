import type { Test } from "tap";
import { baseEnv, runCli } from "./cli.js";
import { connectorsDir } from "./fixtures.js";

/** Broken connector files by supplier name: the keys added to a valid base, and what check-config must say. */
export type BrokenKeyCases = Record<string, [Record<string, unknown>, RegExp]>;

/**
 * Writes `base` plus each case's keys as `<name>.json`, runs `supplier-sync check-config` over
 * them all, and checks it exits 2 with each connector's line naming its error. Returns stdout.
 */
export async function checkBrokenKeys(
  t: Test,
  base: Record<string, unknown>,
  cases: BrokenKeyCases,
  env: Record<string, string> = {},
): Promise<string> {
  const dir = connectorsDir(
    Object.fromEntries(Object.entries(cases).map(([n, [extra]]) => [n, { ...base, ...extra }])),
  );
  const r = await runCli(
    t,
    ["check-config"],
    baseEnv({
      SUPPLIER_SYNC_CONNECTORS_DIR: dir,
      SUPPLIER_SYNC_SUPPLIERS: Object.keys(cases)
        .map((n) => `${n}:1h`)
        .join(","),
      DATABASE_URL: "postgres://127.0.0.1:9/none",
      ...env,
    }),
  );
  t.equal(r.code, 2, r.stderr);
  for (const [name, [, pattern]] of Object.entries(cases)) {
    const line = r.stdout.split("\n").find((l) => l.trimStart().startsWith(`${name} `)) ?? "";
    t.match(line, new RegExp(`${name}\\.json\\): .*${pattern.source}`), `${name}: ${pattern.source}`);
  }
  return r.stdout;
}
