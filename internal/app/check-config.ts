import { redactDatabaseUrl } from "../config/env.js";
import { formatSchedule } from "../config/suppliers.js";
import type { Config } from "../config/types.js";
import type { ConnectorStatus } from "../connectors/load.js";
import { cronFireTimes, formatInZone } from "../ingestion/cron-slots.js";
import { formatDuration } from "../platform/duration.js";
import type { SecretRegistry } from "../platform/redact.js";

/**
 * The report of `supplier-sync check-config`: the schedule, each connector's
 * state and the effective settings. Everything variable goes through
 * the app's `SecretRegistry.safeText` / `redactDatabaseUrl`, so no secret value can appear in it.
 */

function describeConnector(
  status: ConnectorStatus | undefined,
  safeText: (text: string) => string,
): { text: string; ok: boolean } {
  if (status === undefined) return { text: "not checked", ok: false };
  switch (status.status) {
    case "ok":
      return { text: "found", ok: true };
    case "missing":
      return { text: `missing (${safeText(status.path)})`, ok: false };
    case "invalid":
      return { text: `invalid (${safeText(status.path)}): ${safeText(status.reason)}`, ok: false };
  }
}

function formatHttpAddr({ host, port }: Config["httpAddr"]): string {
  return host.includes(":") ? `[${host}]:${port}` : `${host}:${port}`;
}

function padColumns(rows: string[][]): string[] {
  const widths: number[] = [];
  for (const row of rows) {
    row.forEach((cell, i) => {
      widths[i] = Math.max(widths[i] ?? 0, cell.length);
    });
  }
  return rows.map((row) =>
    row
      .map((cell, i) => (i === row.length - 1 ? cell : cell.padEnd(widths[i] ?? 0)))
      .join("  ")
      .trimEnd(),
  );
}

/**
 * Formats the schedule and settings for humans. `ok` is false when an enabled
 * supplier's connector is missing, invalid or was not checked; a disabled
 * supplier's broken connector is shown but does not fail the check.
 */
export function formatCheckConfig(
  config: Config,
  statuses: Map<string, ConnectorStatus>,
  secrets: SecretRegistry,
  nowMs: number = Date.now(),
): { text: string; ok: boolean } {
  const safeText = (text: string) => secrets.safeText(text);
  let problems = 0;
  const rows: string[][] = [];
  for (const supplier of config.suppliers) {
    const connector = describeConnector(statuses.get(supplier.name), safeText);
    if (supplier.enabled && !connector.ok) problems++;
    rows.push([
      supplier.name,
      supplier.cron ? formatSchedule(supplier) : `every ${formatDuration(supplier.intervalMs)}`,
      supplier.enabled ? "enabled" : "disabled",
      `connector ${connector.text}`,
    ]);
  }
  const settings = padColumns([
    ["http addr", formatHttpAddr(config.httpAddr)],
    ["database", config.databaseUrl === undefined ? "embedded" : redactDatabaseUrl(config.databaseUrl)],
    ["db pool max", String(config.dbPoolMax)],
    ["max concurrent ticks", String(config.maxConcurrentTicks)],
    ["shutdown timeout", formatDuration(config.shutdownTimeoutMs)],
    ["retry backoff", formatDuration(config.retryBackoffMs)],
    [
      "lease",
      config.lease === "table"
        ? `table (ttl ${formatDuration(config.leaseTtlMs)})`
        : `advisory (dead peer ${formatDuration(config.leaseDeadPeerMs)})`,
    ],
    ["connectors dir", safeText(config.connectorsDir)],
    ["log level", config.logLevel],
    ["production", config.production ? "yes" : "no"],
  ]);
  const verdict =
    problems === 0
      ? "configuration ok"
      : `configuration has ${problems} problem${problems === 1 ? "" : "s"}: ` +
        "an enabled supplier's connector is missing or invalid";
  const fires: string[][] = [];
  for (const supplier of config.suppliers) {
    if (!supplier.cron) continue;
    const { zone } = supplier.cron;
    for (const [i, at] of cronFireTimes(supplier.cron, nowMs, 3).entries()) {
      const utc = formatInZone(at, "UTC");
      fires.push([
        i === 0 ? supplier.name : "",
        utc,
        zone === "UTC" ? "" : `${formatInZone(at, zone)} (${zone})`,
      ]);
    }
  }
  const lines = [
    "Schedule:",
    ...padColumns(rows).map((line) => `  ${line}`),
    ...(fires.length > 0
      ? ["", "Next fire times (UTC / zone):", ...padColumns(fires).map((l) => `  ${l}`.trimEnd())]
      : []),
    "",
    "Settings:",
    ...settings.map((line) => `  ${line}`),
    "",
    verdict,
  ];
  return { text: `${lines.join("\n")}\n`, ok: problems === 0 };
}
