import { mkdtempSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import t from "tap";
import { ConfigError } from "../platform/errors.js";
import { parseEventsConfig } from "./webhook-env.js";

const SECRET = "0123456789abcdef-secret";

t.test("no webhook: retention default 7 days", async (t) => {
  t.same(parseEventsConfig({}, "/"), { webhook: undefined, eventRetentionMs: 7 * 86_400_000 });
  t.equal(parseEventsConfig({ SUPPLIER_SYNC_EVENT_RETENTION: "36h" }, "/").eventRetentionMs, 36 * 3_600_000);
});

t.test("a webhook with its secret, inline or from a file", async (t) => {
  const inline = parseEventsConfig(
    { SUPPLIER_SYNC_WEBHOOK_URL: "https://erp.example/hooks", SUPPLIER_SYNC_WEBHOOK_SECRET: SECRET },
    "/",
  );
  t.equal(inline.webhook?.url.href, "https://erp.example/hooks");
  t.equal(inline.webhook?.secret, SECRET);
  const dir = mkdtempSync(join(tmpdir(), "ss-webhook-"));
  writeFileSync(join(dir, "secret"), `${SECRET}\n`);
  const fromFile = parseEventsConfig(
    { SUPPLIER_SYNC_WEBHOOK_URL: "http://127.0.0.1:8080/x", SUPPLIER_SYNC_WEBHOOK_SECRET_FILE: "secret" },
    dir,
  );
  t.equal(fromFile.webhook?.secret, SECRET);
});

t.test("bad settings are exit 2 naming the variable, never echoing the secret", async (t) => {
  const cases: [Record<string, string>, RegExp][] = [
    [
      { SUPPLIER_SYNC_WEBHOOK_URL: "https://erp.example/hooks" },
      /SUPPLIER_SYNC_WEBHOOK_SECRET \(or _FILE\) is required/,
    ],
    [{ SUPPLIER_SYNC_WEBHOOK_SECRET: SECRET }, /SUPPLIER_SYNC_WEBHOOK_URL is not/],
    [
      { SUPPLIER_SYNC_WEBHOOK_URL: "not a url", SUPPLIER_SYNC_WEBHOOK_SECRET: SECRET },
      /SUPPLIER_SYNC_WEBHOOK_URL .* not a valid URL/,
    ],
    [{ SUPPLIER_SYNC_WEBHOOK_URL: "ftp://x/", SUPPLIER_SYNC_WEBHOOK_SECRET: SECRET }, /must be http/],
    [
      { SUPPLIER_SYNC_WEBHOOK_URL: "https://u:p@x/", SUPPLIER_SYNC_WEBHOOK_SECRET: SECRET },
      /must not carry credentials/,
    ],
    [
      { SUPPLIER_SYNC_WEBHOOK_URL: "https://x/", SUPPLIER_SYNC_WEBHOOK_SECRET: "short" },
      /at least 16 characters/,
    ],
    [
      {
        SUPPLIER_SYNC_WEBHOOK_URL: "https://x/",
        SUPPLIER_SYNC_WEBHOOK_SECRET: SECRET,
        SUPPLIER_SYNC_WEBHOOK_SECRET_FILE: "f",
      },
      /not both/,
    ],
    [
      { SUPPLIER_SYNC_WEBHOOK_URL: "https://x/", SUPPLIER_SYNC_WEBHOOK_SECRET_FILE: "/nonexistent/s" },
      /_FILE .* cannot be read/,
    ],
    [
      { SUPPLIER_SYNC_EVENT_RETENTION: "5m" },
      /SUPPLIER_SYNC_EVENT_RETENTION "5m" must be a duration between 1h and 365d/,
    ],
  ];
  for (const [env, message] of cases) {
    try {
      parseEventsConfig(env, "/");
      t.fail(`accepted ${JSON.stringify(env)}`);
    } catch (err) {
      t.type(err, ConfigError);
      t.match((err as Error).message, message);
      t.notMatch((err as Error).message, SECRET);
    }
  }
});
