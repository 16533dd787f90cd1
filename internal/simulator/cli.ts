/**
 * Argument and config-file parsing of the standalone simulator (main.ts):
 *   node dist/internal/simulator/main.js [--port 9465] [--host 127.0.0.1] [--config file.json]
 * The config file is `{ "suppliers": { "<name>": SimulatorSupplierOptions } }`
 * (or that map directly). Without it, the demo suppliers are served. A dev
 * tool: its argument parsing is its own, not the daemon's config module.
 */
import { readFileSync } from "node:fs";
import { z } from "zod";
import { supplierOptionsSchema } from "./admin.js";
import type { SimulatorSupplierOptions } from "./types.js";

/** The demo catalog served by `npm start` and `npm run simulator`. */
export const DEMO_SUPPLIERS: Record<string, SimulatorSupplierOptions> = {
  etm: { size: 500, pagination: "page" },
  iek: { size: 300, pagination: "cursor", pageSize: 100 },
};

export const USAGE = "usage: simulator [--port 9465] [--host 127.0.0.1] [--config file.json]";

export interface MainArgs {
  port: number;
  host: string;
  config: string | undefined;
  /** `--help`: print usage and exit 0. */
  help?: boolean;
}

export function parseArgs(argv: string[]): MainArgs {
  const args: MainArgs = { port: 9465, host: "127.0.0.1", config: undefined };
  for (let i = 0; i < argv.length; i++) {
    const flag = argv[i];
    const value = argv[i + 1];
    if (flag === "--help" || flag === "-h") return { ...args, help: true };
    if (value === undefined) throw new Error(`${flag}: missing value\n${USAGE}`);
    i++;
    if (flag === "--port") {
      const port = Number(value);
      if (!Number.isInteger(port) || port < 0 || port > 65535) throw new Error(`--port: invalid ${value}`);
      args.port = port;
    } else if (flag === "--host") args.host = value;
    else if (flag === "--config") args.config = value;
    else throw new Error(`unknown argument ${flag}\n${USAGE}`);
  }
  return args;
}

const configFileSchema = z.record(z.string().regex(/^[a-z][a-z0-9_-]{0,62}$/), supplierOptionsSchema);

export function loadConfig(path: string): Record<string, SimulatorSupplierOptions> {
  const raw: unknown = JSON.parse(readFileSync(path, "utf8"));
  const suppliers =
    typeof raw === "object" && raw !== null && "suppliers" in raw
      ? (raw as { suppliers: unknown }).suppliers
      : raw;
  const result = configFileSchema.safeParse(suppliers);
  if (!result.success) throw new Error(`${path}: ${z.prettifyError(result.error)}`);
  return result.data;
}
