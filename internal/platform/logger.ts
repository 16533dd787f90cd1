import { type DestinationStream, type Logger, pino } from "pino";
import { prettyDestination } from "./pretty-log.js";
import type { SecretRegistry } from "./redact.js";

export type { Logger } from "pino";

export interface LoggerOptions {
  level: string;
  /** The app's redaction registry: every line is scrubbed of the secrets registered in it. */
  secrets: SecretRegistry;
  /** Where lines go; stdout by default. Tests pass a sink and read real output. */
  destination?: DestinationStream;
  /** Time source for the `time` field, injectable like the rest. */
  now?: () => number;
  /**
   * Human-readable lines instead of JSON (the entry point asks for it on a terminal
   * outside production). Ignored when `destination` is given.
   */
  pretty?: boolean;
  /** Write to stderr instead of stdout: for commands whose stdout is data (`runs --json`). */
  stderr?: boolean;
}

/** Header names whose values are always secret. */
const REDACT_PATHS = [
  "authorization",
  "headers.authorization",
  "headers.Authorization",
  "headers.cookie",
  "*.authorization",
  "*.password",
  "*.token",
  "password",
  "token",
];

function scrubDeep(secrets: SecretRegistry, value: unknown, depth = 0): unknown {
  if (typeof value === "string") return secrets.safeText(value);
  if (depth > 6 || value === null || typeof value !== "object") return value;
  if (value instanceof Error) {
    return {
      type: value.name,
      message: secrets.safeText(value.message),
      code: (value as { code?: unknown }).code,
    };
  }
  if (Array.isArray(value)) return value.map((v) => scrubDeep(secrets, v, depth + 1));
  const out: Record<string, unknown> = {};
  for (const [k, v] of Object.entries(value)) out[k] = scrubDeep(secrets, v, depth + 1);
  return out;
}

/**
 * pino JSON logger, one line per event. Every string field and the message are
 * scrubbed of control characters, URL credentials and registered secrets.
 */
export function createLogger(options: LoggerOptions): Logger {
  const { now, secrets } = options;
  return pino(
    {
      level: options.level,
      base: undefined,
      redact: { paths: REDACT_PATHS, censor: "[REDACTED]" },
      timestamp: now ? () => `,"time":${now()}` : pino.stdTimeFunctions.epochTime,
      formatters: { log: (obj) => scrubDeep(secrets, obj) as Record<string, unknown> },
      hooks: {
        logMethod(args, method) {
          const scrubbed = args.map((a) => (typeof a === "string" ? secrets.safeText(a) : a)) as typeof args;
          method.apply(this, scrubbed);
        },
      },
    },
    options.destination ??
      (options.pretty
        ? prettyDestination(pino.destination({ dest: options.stderr ? 2 : 1, sync: true }), true)
        : pino.destination({ dest: options.stderr ? 2 : 1, sync: true })),
  );
}
