import { ConfigError } from "../../internal/platform/errors.js";

export type { Command } from "../../internal/app/commands.js";

import type { Command } from "../../internal/app/commands.js";

export const USAGE = `Usage:
  supplier-sync                       run the daemon (default command)
  supplier-sync --tick-once [--supplier NAME]... [--force]
                                      one tick for each enabled supplier (or those
                                      named), concurrently, then exit
  supplier-sync migrate               apply database migrations and exit
  supplier-sync check-config          validate configuration, print the schedule
  supplier-sync runs [--supplier NAME] [--limit N] [--json]
                                      recent runs with outcome, counts, duration
  supplier-sync preview NAME [--steps N] [--json]
                                      walk the first N steps (default 1) of one
                                      connector and show what it would store
  supplier-sync held [--supplier NAME] [--all] [--json]
                                      runs whose guards held something, and what
  supplier-sync approve RUN_ID [--sku SKU]... [--yes]
                                      apply what a guard held in that run
  supplier-sync dismiss RUN_ID [--sku SKU]...
                                      drop what a guard held (nothing applied)
  supplier-sync changes [--since CURSOR] [--supplier NAME] [--limit N] [--json]
                                      offer changes in commit order, with a cursor
  supplier-sync pause NAME [--reason TEXT] | resume NAME
                                      stop / restart a supplier's walks on every
                                      replica (durable)
  supplier-sync trigger NAME          ask the running daemons for one forced walk
                                      of NAME now (durable request)
  supplier-sync --help | --version

Exit codes: 0 success; 1 a tick did not succeed; 2 invalid configuration or usage;
3 infrastructure unavailable (database unreachable, migrations failed).
Configuration is read from the environment: see docs/operations.md (Environment).`;

/** Parses argv (without node and script). Throws ConfigError naming the bad token. */
export function parseArgs(argv: string[]): Command {
  const args = [...argv];
  if (args.includes("--help") || args.includes("-h")) return { kind: "help" };
  if (args.includes("--version") || args.includes("-v")) return { kind: "version" };
  const first = args[0];
  if (first === "migrate" || first === "check-config") {
    if (args.length > 1) throw new ConfigError(`unexpected argument "${args[1]}" after ${first}`);
    return { kind: first };
  }
  if (first === "runs") return parseRuns(args.slice(1));
  if (first === "preview") return parsePreview(args.slice(1));
  if (first === "held") return parseHeld(args.slice(1));
  if (first === "changes") return parseChanges(args.slice(1));
  if (first === "approve" || first === "dismiss") return parseDecision(first, args.slice(1));
  if (first === "pause" || first === "resume" || first === "trigger")
    return parseControl(first, args.slice(1));
  if (args.length === 0) return { kind: "daemon" };
  if (!args.includes("--tick-once")) {
    throw new ConfigError(`unknown command or option "${first}" (see --help)`);
  }
  const suppliers: string[] = [];
  let force = false;
  for (let i = 0; i < args.length; i++) {
    const a = args[i];
    if (a === "--tick-once") continue;
    if (a === "--force") force = true;
    else if (a === "--supplier") suppliers.push(flagValue(args, ++i, "--supplier"));
    else if (a?.startsWith("--supplier=")) suppliers.push(a.slice("--supplier=".length));
    else throw new ConfigError(`unknown option "${a}" for --tick-once (see --help)`);
  }
  return { kind: "tick-once", suppliers, force };
}

function parseRuns(args: string[]): Command {
  let supplier: string | undefined;
  let limit = 20;
  let json = false;
  for (let i = 0; i < args.length; i++) {
    const a = args[i];
    if (a === "--json") json = true;
    else if (a === "--supplier") supplier = flagValue(args, ++i, "--supplier");
    else if (a === "--limit") {
      const raw = flagValue(args, ++i, "--limit");
      limit = Number(raw);
      if (!/^\d+$/.test(raw) || limit < 1 || limit > 10_000) {
        throw new ConfigError(`--limit must be a whole number from 1 to 10000, got "${raw}"`);
      }
    } else throw new ConfigError(`unknown option "${a}" for runs (see --help)`);
  }
  return { kind: "runs", supplier, limit, json };
}

function parsePreview(args: string[]): Command {
  let name: string | undefined;
  let steps = 1;
  let json = false;
  for (let i = 0; i < args.length; i++) {
    const a = args[i] as string;
    if (a === "--json") json = true;
    else if (a === "--steps") {
      const raw = flagValue(args, ++i, "--steps");
      steps = Number(raw);
      if (!/^\d+$/.test(raw) || steps < 1 || steps > 1_000) {
        throw new ConfigError(`--steps must be a whole number from 1 to 1000, got "${raw}"`);
      }
    } else if (a.startsWith("--")) throw new ConfigError(`unknown option "${a}" for preview (see --help)`);
    else if (name === undefined) name = a;
    else throw new ConfigError(`unexpected argument "${a}" for preview: one supplier name only`);
  }
  if (name === undefined) throw new ConfigError("preview needs a supplier NAME (see --help)");
  return { kind: "preview", name, steps, json };
}

function parseHeld(args: string[]): Command {
  let supplier: string | undefined;
  let all = false;
  let json = false;
  for (let i = 0; i < args.length; i++) {
    const a = args[i];
    if (a === "--json") json = true;
    else if (a === "--all") all = true;
    else if (a === "--supplier") supplier = flagValue(args, ++i, "--supplier");
    else throw new ConfigError(`unknown option "${a}" for held (see --help)`);
  }
  return { kind: "held", supplier, all, json };
}

function parseDecision(kind: "approve" | "dismiss", args: string[]): Command {
  let runId: number | undefined;
  const skus: string[] = [];
  let yes = false;
  for (let i = 0; i < args.length; i++) {
    const a = args[i] as string;
    if (a === "--sku") skus.push(flagValue(args, ++i, "--sku"));
    else if (a === "--yes" && kind === "approve") yes = true;
    else if (a.startsWith("--")) throw new ConfigError(`unknown option "${a}" for ${kind} (see --help)`);
    else if (runId === undefined) {
      if (!/^[1-9]\d{0,15}$/.test(a)) throw new ConfigError(`${kind}: "${a}" is not a run id`);
      runId = Number(a);
    } else throw new ConfigError(`unexpected argument "${a}" for ${kind}: one RUN_ID only`);
  }
  if (runId === undefined) throw new ConfigError(`${kind} needs a RUN_ID (see supplier-sync held)`);
  return { kind, runId, skus, yes };
}

/** `changes` (docs/changes.md): the cursor's syntax is checked where it is parsed, in internal/changes. */
function parseChanges(args: string[]): Command {
  let since = "0:0";
  let supplier: string | undefined;
  let limit = 1000;
  let json = false;
  for (let i = 0; i < args.length; i++) {
    const a = args[i];
    if (a === "--json") json = true;
    else if (a === "--since") since = flagValue(args, ++i, "--since");
    else if (a === "--supplier") supplier = flagValue(args, ++i, "--supplier");
    else if (a === "--limit") {
      const raw = flagValue(args, ++i, "--limit");
      limit = Number(raw);
      if (!/^\d+$/.test(raw) || limit < 1 || limit > 10_000_000) {
        throw new ConfigError(`--limit must be a whole number from 1 to 10000000, got "${raw}"`);
      }
    } else throw new ConfigError(`unknown option "${a}" for changes (see --help)`);
  }
  return { kind: "changes", since, supplier, limit, json };
}

function parseControl(kind: "pause" | "resume" | "trigger", args: string[]): Command {
  let supplier: string | undefined;
  let reason: string | undefined;
  for (let i = 0; i < args.length; i++) {
    const a = args[i] as string;
    if (a === "--reason" && kind === "pause") reason = flagValue(args, ++i, "--reason");
    else if (a.startsWith("--")) throw new ConfigError(`unknown option "${a}" for ${kind} (see --help)`);
    else if (supplier === undefined) supplier = a;
    else throw new ConfigError(`unexpected argument "${a}" for ${kind}: one supplier NAME only`);
  }
  if (supplier === undefined) throw new ConfigError(`${kind} needs a supplier NAME (see --help)`);
  if (kind === "pause") return { kind, supplier, reason };
  return { kind, supplier };
}

function flagValue(args: string[], i: number, flag: string): string {
  const v = args[i];
  if (v === undefined || v.startsWith("--")) throw new ConfigError(`${flag} needs a value`);
  return v;
}
