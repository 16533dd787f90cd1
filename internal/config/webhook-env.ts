import { readFileSync } from "node:fs";
import { resolve } from "node:path";
import { parseDuration } from "../platform/duration.js";
import { ConfigError, errorMessage } from "../platform/errors.js";
import { redactUrlCredentials } from "../platform/redact.js";
import { quoteToken } from "./suppliers.js";

/** Where run events are POSTed (docs/changes.md, Webhooks). */
export interface WebhookConfig {
  /** `SUPPLIER_SYNC_WEBHOOK_URL`: http(s), no credentials in it. */
  url: URL;
  /** `SUPPLIER_SYNC_WEBHOOK_SECRET` or the file named by `SUPPLIER_SYNC_WEBHOOK_SECRET_FILE`: the HMAC key. */
  secret: string;
}

export interface EventsConfig {
  webhook: WebhookConfig | undefined;
  /** `SUPPLIER_SYNC_EVENT_RETENTION`: events older than this are deleted (default 7d). */
  eventRetentionMs: number;
}

const DAY_MS = 86_400_000;

function present(env: Record<string, string | undefined>, name: string): string | undefined {
  const value = env[name];
  return value === undefined || value.trim() === "" ? undefined : value.trim();
}

/** The webhook and event settings; a `ConfigError` naming the variable when one is bad (exit 2). */
export function parseEventsConfig(env: Record<string, string | undefined>, cwd: string): EventsConfig {
  const retentionText = present(env, "SUPPLIER_SYNC_EVENT_RETENTION") ?? "7d";
  const eventRetentionMs = parseDuration(retentionText);
  if (eventRetentionMs === undefined || eventRetentionMs < 3_600_000 || eventRetentionMs > 365 * DAY_MS) {
    throw new ConfigError(
      `SUPPLIER_SYNC_EVENT_RETENTION ${quoteToken(retentionText)} must be a duration between 1h and 365d (e.g. 7d)`,
    );
  }
  const rawUrl = present(env, "SUPPLIER_SYNC_WEBHOOK_URL");
  const inline = present(env, "SUPPLIER_SYNC_WEBHOOK_SECRET");
  const file = present(env, "SUPPLIER_SYNC_WEBHOOK_SECRET_FILE");
  if (rawUrl === undefined) {
    if (inline !== undefined || file !== undefined) {
      throw new ConfigError("SUPPLIER_SYNC_WEBHOOK_SECRET is set but SUPPLIER_SYNC_WEBHOOK_URL is not");
    }
    return { webhook: undefined, eventRetentionMs };
  }
  let url: URL;
  try {
    url = new URL(rawUrl);
  } catch {
    throw new ConfigError(
      `SUPPLIER_SYNC_WEBHOOK_URL ${quoteToken(redactUrlCredentials(rawUrl), 200)} is not a valid URL`,
    );
  }
  if (url.protocol !== "http:" && url.protocol !== "https:") {
    throw new ConfigError(
      `SUPPLIER_SYNC_WEBHOOK_URL must be http:// or https://, got ${quoteToken(url.protocol)}`,
    );
  }
  if (url.username !== "" || url.password !== "") {
    throw new ConfigError("SUPPLIER_SYNC_WEBHOOK_URL must not carry credentials: the body is signed instead");
  }
  if (inline !== undefined && file !== undefined) {
    throw new ConfigError("set SUPPLIER_SYNC_WEBHOOK_SECRET or SUPPLIER_SYNC_WEBHOOK_SECRET_FILE, not both");
  }
  let secret = inline;
  if (file !== undefined) {
    try {
      secret = readFileSync(resolve(cwd, file), "utf8").trim();
    } catch (err) {
      throw new ConfigError(
        `SUPPLIER_SYNC_WEBHOOK_SECRET_FILE ${quoteToken(file)} cannot be read: ${errorMessage(err)}`,
      );
    }
  }
  if (secret === undefined || secret === "") {
    throw new ConfigError(
      "SUPPLIER_SYNC_WEBHOOK_URL is set: SUPPLIER_SYNC_WEBHOOK_SECRET (or _FILE) is required to sign the events",
    );
  }
  if (secret.length < 16) {
    throw new ConfigError("SUPPLIER_SYNC_WEBHOOK_SECRET must be at least 16 characters");
  }
  return { webhook: { url, secret }, eventRetentionMs };
}
