import { writeFileSync } from "node:fs";
import { join } from "node:path";
import t from "tap";
import { ConfigError } from "../../platform/errors.js";
import { SecretRegistry } from "../../platform/redact.js";
import type { AuthDefinition } from "./connector-schema.js";
import { resolveAuthHeaders, resolveLogin } from "./credentials.js";

function sources(dir: string, env: Record<string, string> = {}, secrets = new SecretRegistry()) {
  return { connectorsDir: dir, readSecretEnv: (name: string) => env[name], secrets };
}

/** The ConfigError message of `fn`; any other exception fails the test by propagating. */
function messageOf(fn: () => unknown): string {
  try {
    fn();
  } catch (err) {
    if (err instanceof ConfigError) return err.message;
    throw err;
  }
  return "<nothing thrown>";
}

t.test("none", async (t) => {
  t.same(resolveAuthHeaders({ type: "none" }, sources(t.testdir())), {});
});

t.test("bearer from env", async (t) => {
  const secrets = new SecretRegistry();
  const headers = resolveAuthHeaders(
    { type: "bearer", tokenEnv: "ETM_TOKEN" },
    sources(t.testdir(), { ETM_TOKEN: "tok-env-123" }, secrets),
  );
  t.same(headers, { authorization: "Bearer tok-env-123" });
  t.equal(secrets.safeText("sent tok-env-123"), "sent [REDACTED]", "registered for redaction");
  t.equal(new SecretRegistry().safeText("sent tok-env-123"), "sent tok-env-123", "in that registry only");
});

t.test("header from file, relative to the connectors dir, re-read after rotation", async (t) => {
  const dir = t.testdir({ secrets: { key: "first-key-1\n" } });
  const auth: AuthDefinition = { type: "header", name: "X-Api-Key", valueFile: "secrets/key" };
  t.same(resolveAuthHeaders(auth, sources(dir)), { "X-Api-Key": "first-key-1" }, "one newline trimmed");
  writeFileSync(join(dir, "secrets/key"), "second-key-2");
  t.same(resolveAuthHeaders(auth, sources(dir)), { "X-Api-Key": "second-key-2" }, "rotated value applies");
  writeFileSync(join(dir, "secrets/key"), "third-key-3\n\n");
  t.throws(
    () => resolveAuthHeaders(auth, sources(dir)),
    { name: "ConfigError", message: /line break/ },
    "only one trailing newline is trimmed",
  );
});

t.test("header value with an inner line break is refused without printing it", async (t) => {
  const dir = t.testdir({ key: "abc\r\nX-Evil: 1\n" });
  const message = messageOf(() =>
    resolveAuthHeaders({ type: "header", name: "X-Api-Key", valueFile: "key" }, sources(dir)),
  );
  t.match(message, /valueFile "key".*line break/);
  t.notMatch(message, /Evil/);
});

t.test("basic from an absolute file and an env var", async (t) => {
  const dir = t.testdir({ user: "alice\r\n" });
  const secrets = new SecretRegistry();
  const headers = resolveAuthHeaders(
    { type: "basic", usernameFile: join(dir, "user"), passwordEnv: "IEK_PASSWORD" },
    sources("/nonexistent", { IEK_PASSWORD: "pa:ss wörd" }, secrets),
  );
  const encoded = Buffer.from("alice:pa:ss wörd", "utf8").toString("base64");
  t.same(headers, { authorization: `Basic ${encoded}` });
  t.equal(secrets.safeText(`Authorization: Basic ${encoded}`), "Authorization: Basic [REDACTED]");
});

t.test("basic username with a colon is refused", async (t) => {
  const message = messageOf(() =>
    resolveAuthHeaders(
      { type: "basic", usernameEnv: "U", passwordEnv: "P" },
      sources(t.testdir(), { U: "a:b", P: "secret-pw" }),
    ),
  );
  t.match(message, /username must not contain ':'/);
});

t.test("unresolvable secrets name the field and the variable or file, never the value", async (t) => {
  const dir = t.testdir({ empty: "", newline: "\n", folder: {} });
  const cases: Array<[AuthDefinition, Record<string, string>, RegExp]> = [
    [{ type: "bearer", tokenEnv: "MISSING_TOKEN" }, {}, /auth\.tokenEnv.*MISSING_TOKEN.*unset or empty/],
    [{ type: "bearer", tokenEnv: "EMPTY_TOKEN" }, { EMPTY_TOKEN: "" }, /auth\.tokenEnv.*EMPTY_TOKEN/],
    [{ type: "bearer", tokenFile: "nope" }, {}, /auth\.tokenFile "nope".*cannot be read: ENOENT/],
    [{ type: "bearer", tokenFile: "empty" }, {}, /auth\.tokenFile "empty".*is empty/],
    [{ type: "bearer", tokenFile: "newline" }, {}, /auth\.tokenFile "newline".*is empty/],
    [{ type: "bearer", tokenFile: "folder" }, {}, /auth\.tokenFile "folder".*EISDIR/],
    [{ type: "header", name: "X-Key", valueEnv: "NO_VALUE" }, {}, /auth\.valueEnv.*NO_VALUE/],
    [
      { type: "basic", usernameEnv: "USER_OK", passwordEnv: "NO_PASSWORD" },
      { USER_OK: "bob-the-user" },
      /auth\.passwordEnv.*NO_PASSWORD/,
    ],
    [
      { type: "basic", usernameFile: "nope", passwordEnv: "P" },
      { P: "pw-secret-9" },
      /auth\.usernameFile "nope"/,
    ],
    [{ type: "bearer" }, {}, /one of tokenEnv or tokenFile is required/],
    [
      { type: "bearer", tokenEnv: "T", tokenFile: "empty" },
      { T: "tok-both-1" },
      /either tokenEnv or tokenFile, not both/,
    ],
  ];
  for (const [auth, env, expected] of cases) {
    const message = messageOf(() => resolveAuthHeaders(auth, sources(dir, env)));
    t.match(message, expected, JSON.stringify(auth));
    for (const value of Object.values(env).filter(Boolean))
      t.notOk(message.includes(value), `no ${value} in ${message}`);
  }
});

t.test(
  "login pathParams: percent-encoded into the path, the secret and its encoded form redacted",
  async (t) => {
    const secrets = new SecretRegistry();
    const login = resolveLogin(
      {
        method: "GET",
        path: "/auth.access.token/{master_key}/{region}",
        query: {},
        headers: {},
        pathParams: { master_key: { env: "DKC_MASTER_KEY" }, region: "ru msk" },
      },
      sources(t.testdir(), { DKC_MASTER_KEY: "k3y/with space" }, secrets),
    );
    t.equal(login.path, "/auth.access.token/k3y%2Fwith%20space/ru%20msk");
    t.equal(
      secrets.safeText(`GET ${login.path}`),
      "GET /auth.access.token/[REDACTED]/ru%20msk",
      "a literal stays",
    );
    t.equal(secrets.safeText("key k3y/with space"), "key [REDACTED]");
    t.match(
      messageOf(() =>
        resolveLogin(
          { method: "GET", path: "/t/{k}", query: {}, headers: {}, pathParams: { k: { env: "UNSET_KEY" } } },
          sources(t.testdir()),
        ),
      ),
      /auth\.login\.pathParams\.k/,
    );
  },
);
