#!/usr/bin/env node
/**
 * `npm start`: the daemon with the bundled demo suppliers. Starts the built-in
 * supplier simulator on 127.0.0.1:9465 (where config/suppliers/*.json point), fills
 * in demo defaults for what the environment leaves unset, then runs the daemon
 * exactly as `supplier-sync` would (embedded PostgreSQL when DATABASE_URL is unset).
 */
import { startSimulator } from "../../internal/simulator/index.js";

const DEMO_DEFAULTS: Record<string, string> = {
  SUPPLIER_SYNC_SUPPLIERS: "etm:1m,iek:2m",
  SUPPLIER_SYNC_CONNECTORS_DIR: "config/suppliers",
};

const simulator = await startSimulator({
  port: 9465,
  suppliers: {
    etm: { size: 500, pageSize: 100, pagination: "page" },
    iek: { size: 300, pageSize: 100, pagination: "cursor" },
  },
});
process.stderr.write(`demo: supplier simulator serving etm and iek at ${simulator.url}\n`);
for (const [key, value] of Object.entries(DEMO_DEFAULTS)) process.env[key] ??= value;
await import("./main.js");
