import { readFileSync } from "node:fs";
import { resolve } from "node:path";
import { ConfigError, errorMessage } from "../../platform/errors.js";
import type { SecretRegistry } from "../../platform/redact.js";
import {
  type AuthDefinition,
  type LoginDefinition,
  SECRET_SLOTS,
  type SecretSlot,
  type SecretValue,
} from "./connector-schema.js";
import { substitute } from "./placeholders.js";

/**
 * Connector credentials → request headers (docs/connectors.md). A secret is named in the
 * connector file, either as an env var (`tokenEnv` …) or as a file (`tokenFile` …,
 * for Kubernetes and Docker secrets), never written there.
 *
 * Invariants: files are re-read at every call, so a rotated secret applies at the
 * next tick without a restart; every value resolved is registered with the
 * app's redaction registry (`SecretSources.secrets`) before its header is returned; no error message ever
 * contains a secret value, only the field and the variable or file that holds it.
 */

/** Where `resolveAuthHeaders` finds secrets. */
export interface SecretSources {
  /** Folder of the connector files; relative secret file paths are relative to it. */
  connectorsDir: string;
  /** Reads an env var named by the connector file (`Config.readSecretEnv`). */
  readSecretEnv: (name: string) => string | undefined;
  /** The app's redaction registry: every value resolved is added to it. */
  secrets: SecretRegistry;
}

/** Secret files are small (a token, a password); anything larger is a wrong path. */
const MAX_SECRET_FILE_BYTES = 64 * 1024;

/**
 * A slot of `auth` (connector-schema.ts, `SECRET_SLOTS`) with the values `auth` gave its
 * keys; `label` names it in errors (default: the slot's own, e.g. `auth.token`).
 */
function slotRef(slot: SecretSlot, auth: object, label: string = slot.label): SecretRef {
  const given = auth as Partial<Record<string, string>>;
  return {
    label,
    envKey: slot.envKey,
    envName: given[slot.envKey],
    fileKey: slot.fileKey,
    filePath: given[slot.fileKey],
  };
}

/** One secret slot of an auth block: its field names and the values the file gave them. */
export interface SecretRef {
  /** Human name used in errors, e.g. `auth.token`. */
  label: string;
  envKey: string;
  envName: string | undefined;
  fileKey: string;
  filePath: string | undefined;
}

function readSecretFile(ref: SecretRef, path: string, connectorsDir: string): string {
  const absolute = resolve(connectorsDir, path);
  const where = `${ref.fileKey === "file" ? ref.label : `auth.${ref.fileKey}`} ${JSON.stringify(path)} (${absolute})`;
  let text: string;
  try {
    const bytes = readFileSync(absolute);
    if (bytes.length > MAX_SECRET_FILE_BYTES) {
      throw new ConfigError(`${where} is larger than ${MAX_SECRET_FILE_BYTES} bytes: not a secret file?`);
    }
    text = bytes.toString("utf8");
  } catch (err) {
    if (err instanceof ConfigError) throw err;
    const code = (err as { code?: unknown }).code;
    // The OS message (ENOENT, EACCES, EISDIR) never contains file contents.
    throw new ConfigError(`${where} cannot be read: ${typeof code === "string" ? code : errorMessage(err)}`, {
      cause: err,
    });
  }
  // Exactly one trailing newline is an artefact of `echo > file` or `kubectl create secret --from-file`.
  const value = text.endsWith("\r\n") ? text.slice(0, -2) : text.endsWith("\n") ? text.slice(0, -1) : text;
  if (value === "") throw new ConfigError(`${where} is empty`);
  return value;
}

export function resolveSecret(ref: SecretRef, sources: SecretSources): string {
  let value: string;
  let where: string;
  if (ref.envName !== undefined && ref.filePath !== undefined) {
    // The schema rejects this too; repeated here because callers may build definitions by hand.
    throw new ConfigError(`auth: set either ${ref.envKey} or ${ref.fileKey}, not both`);
  }
  if (ref.envName !== undefined) {
    where = `${ref.envKey === "env" ? ref.label : `auth.${ref.envKey}`}: environment variable ${ref.envName}`;
    const env = sources.readSecretEnv(ref.envName);
    if (env === undefined || env === "") throw new ConfigError(`${where} is unset or empty`);
    value = env;
  } else if (ref.filePath !== undefined) {
    where = `${ref.fileKey === "file" ? ref.label : `auth.${ref.fileKey}`} ${JSON.stringify(ref.filePath)}`;
    value = readSecretFile(ref, ref.filePath, sources.connectorsDir);
  } else {
    throw new ConfigError(`auth: one of ${ref.envKey} or ${ref.fileKey} is required for ${ref.label}`);
  }
  // A line break would split the header (request smuggling); undici would also refuse it later, less clearly.
  if (/[\r\n\0]/.test(value)) throw new ConfigError(`${where} contains a line break or NUL character`);
  return value;
}

/**
 * Turns a connector's `auth` block into request headers: `none` → `{}`;
 * `bearer` → `authorization: Bearer <token>`; `header` → `<name>: <value>`;
 * `basic` → `authorization: Basic base64(user:pass)`.
 *
 * Call it for every tick (not once at start-up) so rotated secret files apply.
 *
 * @throws ConfigError naming the field and the env var or file when a secret is
 * unset, empty, unreadable or malformed. The value itself is never in the message.
 */
export function resolveAuthHeaders(auth: AuthDefinition, sources: SecretSources): Record<string, string> {
  switch (auth.type) {
    case "none":
      return {};
    case "query":
    case "oauth2":
    case "session":
      // Not headers: the query value is added per request, tokens come from a login (connectors/auth).
      return {};
    case "bearer": {
      const token = resolveSecret(slotRef(SECRET_SLOTS.token, auth), sources);
      sources.secrets.add(token);
      return { authorization: `Bearer ${token}` };
    }
    case "header": {
      const value = resolveSecret(slotRef(SECRET_SLOTS.value, auth, `header ${auth.name}`), sources);
      sources.secrets.add(value);
      return { [auth.name]: value };
    }
    case "basic": {
      const username = resolveSecret(slotRef(SECRET_SLOTS.username, auth), sources);
      if (username.includes(":")) {
        // RFC 7617: the first colon separates user from password, so the server would split it wrongly.
        throw new ConfigError("auth: the basic-auth username must not contain ':'");
      }
      const password = resolveSecret(slotRef(SECRET_SLOTS.password, auth), sources);
      const pair = registerPair(sources, username, password);
      return { authorization: `Basic ${Buffer.from(pair, "utf8").toString("base64")}` };
    }
  }
}

/**
 * The secret of `auth.type: "query"`: the parameter and its value, registered
 * for redaction. @throws ConfigError like {@link resolveAuthHeaders}.
 */
export function resolveQueryAuth(
  auth: Extract<AuthDefinition, { type: "query" }>,
  sources: SecretSources,
): { param: string; value: string } {
  const value = resolveSecret(slotRef(SECRET_SLOTS.value, auth, `query parameter ${auth.param}`), sources);
  sources.secrets.add(value);
  return { param: auth.param, value };
}

/** OAuth2 client credentials, registered for redaction. */
export function resolveOAuth2Client(
  auth: Extract<AuthDefinition, { type: "oauth2" }>,
  sources: SecretSources,
): { clientId: string; clientSecret: string } {
  const clientId = resolveSecret(slotRef(SECRET_SLOTS.clientId, auth), sources);
  const clientSecret = resolveSecret(slotRef(SECRET_SLOTS.clientSecret, auth), sources);
  registerPair(sources, clientId, clientSecret);
  return { clientId, clientSecret };
}

/**
 * Registers `id:secret` and both parts for redaction; returns the pair. A Basic header carries
 * base64(id:secret). The registry scrubs in insertion order, and when the id is 3n bytes
 * base64(secret) is a suffix of it: the pair goes first so it is scrubbed whole.
 */
function registerPair(sources: SecretSources, id: string, secret: string): string {
  const pair = `${id}:${secret}`;
  sources.secrets.add(pair);
  sources.secrets.add(id);
  sources.secrets.add(secret);
  return pair;
}

/**
 * One value of a login request: a literal, or a secret reference resolved now
 * (files re-read at every call) and registered for redaction. `label` names
 * the key for errors, e.g. `auth.login.query.pwd`.
 */
export function resolveSecretValue(value: SecretValue, label: string, sources: SecretSources): string {
  if (typeof value === "string") return value;
  const secret =
    "env" in value
      ? resolveSecret(
          { label, envKey: "env", envName: value.env, fileKey: "file", filePath: undefined },
          sources,
        )
      : resolveSecret(
          { label, envKey: "env", envName: undefined, fileKey: "file", filePath: value.file },
          sources,
        );
  sources.secrets.add(secret);
  return secret;
}

function isSecretRef(value: unknown): value is SecretValue {
  if (value === null || typeof value !== "object" || Array.isArray(value)) return false;
  const keys = Object.keys(value);
  return (
    keys.length === 1 &&
    ((keys[0] === "env" && typeof (value as { env: unknown }).env === "string") ||
      (keys[0] === "file" && typeof (value as { file: unknown }).file === "string"))
  );
}

/** A login request with every secret reference resolved (query, headers, form, and `{env}`/`{file}` objects in body). */
export interface ResolvedLogin {
  method: "GET" | "POST";
  path: string;
  query: Record<string, string>;
  headers: Record<string, string>;
  body: unknown;
  form: Record<string, string> | undefined;
}

export function resolveLogin(login: LoginDefinition, sources: SecretSources): ResolvedLogin {
  const map = (values: Record<string, SecretValue>, where: string) =>
    Object.fromEntries(
      Object.entries(values).map(([k, v]) => [k, resolveSecretValue(v, `auth.login.${where}.${k}`, sources)]),
    );
  const body = (value: unknown, path: string): unknown => {
    if (isSecretRef(value)) return resolveSecretValue(value, path, sources);
    if (Array.isArray(value)) return value.map((v, i) => body(v, `${path}.${i}`));
    if (value !== null && typeof value === "object") {
      return Object.fromEntries(Object.entries(value).map(([k, v]) => [k, body(v, `${path}.${k}`)]));
    }
    return value;
  };
  // A path param is percent-encoded into the path: its encoded form is registered for redaction too.
  const params = map(login.pathParams ?? {}, "pathParams");
  for (const [k, v] of Object.entries(login.pathParams ?? {})) {
    if (typeof v !== "string") sources.secrets.add(encodeURIComponent(params[k] as string));
  }
  return {
    method: login.method,
    path: substitute(login.path, params, "path"),
    query: map(login.query, "query"),
    headers: map(login.headers, "headers"),
    body: login.body === undefined ? undefined : body(login.body, "auth.login.body"),
    form: login.form === undefined ? undefined : map(login.form, "form"),
  };
}

/**
 * Resolves every secret `auth` names (tokens, keys, client credentials, login
 * values), so `check-config` and connector loading report a missing one.
 * @throws ConfigError naming the key and the env var or file.
 */
export function checkAuthSecrets(auth: AuthDefinition, sources: SecretSources): void {
  if (auth.type === "query") resolveQueryAuth(auth, sources);
  else if (auth.type === "oauth2") resolveOAuth2Client(auth, sources);
  else if (auth.type === "session") resolveLogin(auth.login, sources);
  else resolveAuthHeaders(auth, sources);
}
