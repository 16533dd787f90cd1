import t from "tap";
import { loadConfig } from "../config/env.js";
import { loadConnectors } from "../connectors/load.js";
import { SecretRegistry } from "../platform/redact.js";
import { formatCheckConfig } from "./check-config.js";

const definition = (auth: unknown) =>
  JSON.stringify({ baseUrl: "https://api.example", auth, fields: { sku: "id", price: "p" } });

async function setup(t: { testdir(fixture: unknown): string }, suppliers: string, databaseUrl?: string) {
  const dir = t.testdir({
    "etm.json": definition({ type: "bearer", tokenEnv: "ETM_TOKEN" }),
    "iek.json": definition({ type: "basic", usernameEnv: "IEK_USER", passwordFile: "iek.pw" }),
    "iek.pw": "iek-password-secret\n",
    "bad.json": definition({ type: "bearer", tokenEnv: "BAD_TOKEN_UNSET" }),
  });
  const config = loadConfig(
    {
      SUPPLIER_SYNC_SUPPLIERS: suppliers,
      SUPPLIER_SYNC_CONNECTORS_DIR: dir,
      SUPPLIER_SYNC_HTTP_ADDR: "[::1]:9090",
      DATABASE_URL: databaseUrl,
      ETM_TOKEN: "etm-token-secret",
      IEK_USER: "iek-user-secret",
    },
    "/",
  );
  const secrets = new SecretRegistry();
  return {
    dir,
    config,
    secrets,
    statuses: await loadConnectors(
      config,
      config.suppliers.map((s) => s.name),
      secrets,
    ),
  };
}

t.test("a healthy schedule is ok and lists every supplier and setting", async (t) => {
  const { config, statuses, secrets } = await setup(
    t,
    "etm:6h,iek:1h30m:false",
    "postgres://app:db-pass-secret@db:5432/x",
  );
  const { text, ok } = formatCheckConfig(config, statuses, secrets);
  t.equal(ok, true);
  t.match(text, /etm +every 6h +enabled +connector found/);
  t.match(text, /iek +every 1h30m +disabled +connector found/);
  t.match(text, /http addr +\[::1\]:9090/);
  t.match(text, /database +postgres:\/\/\*\*\*@db:5432\/x/);
  t.match(text, /db pool max +8/);
  t.match(text, /max concurrent ticks +4/);
  t.match(text, /shutdown timeout +25s/);
  t.match(text, /retry backoff +1m/);
  t.match(text, /configuration ok/);
  for (const secret of ["etm-token-secret", "iek-user-secret", "iek-password-secret", "db-pass-secret"]) {
    t.notOk(text.includes(secret), `no ${secret}`);
  }
});

t.test("an enabled supplier with a missing or invalid connector fails the check", async (t) => {
  const { dir, config, statuses, secrets } = await setup(t, "etm:6h,bad:1h,gone:1d");
  const { text, ok } = formatCheckConfig(config, statuses, secrets);
  t.equal(ok, false);
  t.match(text, /database +embedded/);
  t.match(
    text,
    /bad +every 1h +enabled +connector invalid \(.*bad\.json\): auth\.tokenEnv: .*BAD_TOKEN_UNSET/,
  );
  t.ok(text.includes(`gone  every 1d  enabled  connector missing (${dir}/gone.json)`), text);
  t.match(text, /2 problems/);
});

t.test("a broken connector of a disabled supplier is shown but does not fail the check", async (t) => {
  const { config, statuses, secrets } = await setup(t, "etm:6h,gone:1d:false");
  const { text, ok } = formatCheckConfig(config, statuses, secrets);
  t.equal(ok, true);
  t.match(text, /gone +every 1d +disabled +connector missing/);
});

t.test("a supplier without a status is reported, not assumed fine", async (t) => {
  const { config } = await setup(t, "etm:6h");
  const { text, ok } = formatCheckConfig(config, new Map(), new SecretRegistry());
  t.equal(ok, false);
  t.match(text, /connector not checked/);
});

t.test("a cron schedule prints its next three fire times in UTC and in its zone", async (t) => {
  const { config, statuses, secrets } = await setup(
    t,
    "etm:cron(0 3 * * * @Europe/Moscow),iek:cron(30 */6 * * *)",
  );
  const { text, ok } = formatCheckConfig(config, statuses, secrets, Date.parse("2026-12-01T12:00:00Z"));
  t.equal(ok, true);
  t.match(text, /etm +cron\(0 3 \* \* \* @Europe\/Moscow\) +enabled/);
  t.match(text, /Next fire times \(UTC \/ zone\):/);
  t.match(text, /etm +2026-12-02T00:00:00Z +2026-12-02T03:00:00\+03:00 \(Europe\/Moscow\)/);
  t.match(text, /\n +2026-12-03T00:00:00Z +2026-12-03T03:00:00\+03:00/);
  t.match(text, /\n +2026-12-04T00:00:00Z +2026-12-04T03:00:00\+03:00/);
  t.match(text, /iek +2026-12-01T12:30:00Z\n +2026-12-01T18:30:00Z\n +2026-12-02T00:30:00Z\n/);
});
