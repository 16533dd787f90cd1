// Session logins, OAuth2 client credentials and query keys against the simulator on loopback (issue 16).
import t from "tap";
import { createTestDatabase, testPool } from "../../test/helpers/db.js";
import { forcedTick, tickDeps } from "../../test/helpers/tick.js";
import { ManualClock } from "../platform/clock.js";
import { IngestionError } from "../platform/errors.js";
import { startSimulator } from "../simulator/index.js";
import type { SimSessionAuth, Simulator, SimulatorSupplierOptions } from "../simulator/types.js";
import { buildConnector, collectPages, simDefinition, walkContext, walkError } from "./test-support.js";

const LOGIN = "etm-user";
const PASSWORD = "etm-password-9c41f7";
const env: Record<string, string> = {
  ETM_LOGIN: LOGIN,
  ETM_PASSWORD: PASSWORD,
  SYSTEME_KEY: "systeme-key-5d2e8a",
};
const readSecretEnv = (name: string) => env[name];

async function simulator(
  t: Tap,
  name: string,
  options: SimulatorSupplierOptions,
  clock?: ManualClock,
): Promise<Simulator> {
  const sim = await startSimulator({
    suppliers: { [name]: options },
    ...(clock ? { clock: () => clock.now() } : {}),
  });
  t.teardown(() => sim.close());
  return sim;
}
type Tap = { teardown(fn: () => unknown): void };

const etmSim = (auth: Partial<SimSessionAuth> = {}): SimulatorSupplierOptions => ({
  size: 100,
  pageSize: 20,
  envelope: true,
  auth: {
    type: "session",
    loginPath: "/api/v1/user/login",
    credentials: { log: LOGIN, pwd: PASSWORD },
    expiredAs: "body403",
    ...auth,
  },
});

/** The ETM connector (docs/connectors.md, Authentication): login by POST with secrets in the query, token at data.session. */
function etmDefinition(
  baseUrl: string,
  auth: Record<string, unknown> = {},
  extra: Record<string, unknown> = {},
) {
  return simDefinition(baseUrl, {
    request: { path: "/v1/offers", query: { limit: "20" } },
    auth: {
      type: "session",
      login: {
        method: "POST",
        path: "/api/v1/user/login",
        query: { log: { env: "ETM_LOGIN" }, pwd: { env: "ETM_PASSWORD" } },
      },
      token: { path: "data.session" },
      send: { query: "session-id" },
      expiredWhen: [{ status: [401] }, { path: "status.code", in: [403] }],
      ...auth,
    },
    errors: [
      { path: "status.code", notIn: [200], then: "fail", code: "SUPPLIER", messagePath: "status.message" },
    ],
    ...extra,
  });
}

function logins(metricsText: string, result: "ok" | "failed"): number {
  const m = new RegExp(`ingestion_auth_logins_total\\{supplier="acme",result="${result}"\\} (\\d+)`).exec(
    metricsText,
  );
  return m ? Number(m[1]) : 0;
}

function assertNoSecrets(
  t: Tap & { notOk(v: unknown, m: string): void },
  lines: string[],
  secrets: string[],
) {
  const text = lines.join("\n");
  for (const s of secrets)
    t.notOk(text.includes(s), `secret ${s.slice(0, 6)}… absent from ${lines.length} log lines`);
}

t.test("session: a session that expires mid-walk completes with exactly one extra login", async (t) => {
  const sim = await simulator(t, "etm", etmSim({ expireAfterRequests: 3 }));
  const c = buildConnector(t, etmDefinition(sim.baseUrl("etm")), { readSecretEnv });
  const pages = await collectPages(c.connector, walkContext(c.log));
  t.equal(pages.flatMap((p) => p.offers).length, 100, "every offer");
  const stats = sim.stats("etm");
  t.equal(stats.logins, 2, "one login, then exactly one more after the expiry");
  t.equal(stats.expiredRequests, 1);
  t.ok(
    stats.urls.every((u) => u.includes("session-id=")),
    "every catalog request carried session-id",
  );
  t.equal(logins(await c.metrics.registry.metrics(), "ok"), 2, "ingestion_auth_logins_total ok");
  t.ok(
    c.lines.some((l) => l.includes("session expired: logging in again")),
    "the re-login is logged",
  );
  assertNoSecrets(t, c.lines, [PASSWORD, ...stats.issuedTokens]);
});

t.test("session: a second expiry in a row fails the step AUTH", async (t) => {
  const sim = await simulator(t, "etm", etmSim({ expireAfterRequests: 0 }));
  const c = buildConnector(t, etmDefinition(sim.baseUrl("etm")), { readSecretEnv });
  const err = await walkError(c.connector, walkContext(c.log));
  t.ok(err instanceof IngestionError);
  t.equal((err as IngestionError).code, "AUTH");
  t.match((err as IngestionError).message, /expired again/);
  t.equal(sim.stats("etm").logins, 2, "exactly one re-login");
  t.equal((err as IngestionError).attempts, 4, "login, request, login, request");
});

t.test("session: the token is reused across walks, renewed after 90 % of ttlMs", async (t) => {
  const sim = await simulator(t, "etm", etmSim());
  const c = buildConnector(t, etmDefinition(sim.baseUrl("etm")), { readSecretEnv });
  for (let i = 0; i < 3; i++) await collectPages(c.connector, walkContext(c.log));
  t.equal(sim.stats("etm").logins, 1, "three walks, one login");

  // The connector (and the simulator) on a manual clock: time passes only when the test
  // says so, however slow the walks are. ttlMs 2 s, so renewal is due 1.8 s after the login.
  const clock = new ManualClock(Date.now());
  const sim2 = await simulator(t, "etm", etmSim(), clock);
  const short = buildConnector(t, etmDefinition(sim2.baseUrl("etm"), { ttlMs: 2_000 }), {
    readSecretEnv,
    clock,
  });
  await collectPages(short.connector, walkContext(short.log));
  t.equal(sim2.stats("etm").logins, 1, "one login before the wait");
  await clock.advance(1_799);
  await collectPages(short.connector, walkContext(short.log));
  t.equal(sim2.stats("etm").logins, 1, "1 ms short of 90 % of ttlMs, the token is reused");
  await clock.advance(51);
  await collectPages(short.connector, walkContext(short.log));
  t.equal(sim2.stats("etm").logins, 2, "renewed once 90 % of ttlMs had passed");
  t.equal(sim2.stats("etm").expiredRequests, 0, "renewed before any expiry");
});

t.test("session: three consecutive ticks never break the login rate limit", async (t) => {
  // The spacing (2 s) is far longer than a tick takes even on a loaded machine, so each of the
  // next two logins is due sooner than it and must wait (with 400 ms, ticks that took longer
  // than that on a busy CI machine were spaced by themselves and never logged the wait).
  const sim = await simulator(t, "etm", { ...etmSim({ minLoginIntervalMs: 2_000 }), pagination: "none" });
  // ttlMs so short that every walk (one request each) needs a new login: spacing alone keeps them apart.
  const def = etmDefinition(
    sim.baseUrl("etm"),
    { ttlMs: 1, minLoginIntervalMs: 2_000 },
    { pagination: { type: "none" } },
  );
  // The daemon keeps one connector per supplier for its lifetime: three ticks are three real
  // runTick calls (lease, run row, page transaction) on one connector.
  const c = buildConnector(t, def, { readSecretEnv, supplier: "etm" });
  const deps = tickDeps(testPool(t, await createTestDatabase(t), 4), c.log);
  const started = Date.now();
  for (let i = 0; i < 3; i++) t.equal((await forcedTick(deps, "etm", c.connector)).outcome, "success");
  const stats = sim.stats("etm");
  t.equal(stats.logins, 3);
  t.equal(stats.loginViolations, 0, "no login sooner than minLoginIntervalMs");
  t.ok(Date.now() - started >= 4_000, "the second and third logins waited");
  t.equal(
    c.lines.filter((l) => l.includes("login due sooner than minLoginIntervalMs")).length,
    2,
    "the second and third logins each logged their wait",
  );
});

t.test("session: a login due sooner than the page deadline allows fails DEADLINE", async (t) => {
  const sim = await simulator(t, "etm", { ...etmSim(), pagination: "none" });
  const def = etmDefinition(
    sim.baseUrl("etm"),
    { ttlMs: 1, minLoginIntervalMs: 60_000 },
    { timeouts: { pageMs: 300 }, pagination: { type: "none" } },
  );
  const c = buildConnector(t, def, { readSecretEnv });
  await collectPages(c.connector, walkContext(c.log));
  const err = await walkError(c.connector, walkContext(c.log));
  t.equal((err as IngestionError).code, "DEADLINE");
  t.equal(sim.stats("etm").logins, 1, "the second login was never sent");
});

t.test("session: a wrong password fails AUTH after exactly one login request", async (t) => {
  const sim = await simulator(t, "etm", etmSim());
  const c = buildConnector(t, etmDefinition(sim.baseUrl("etm")), {
    readSecretEnv: (n) => (n === "ETM_PASSWORD" ? "wrong-password-1234" : env[n]),
  });
  const err = await walkError(c.connector, walkContext(c.log));
  t.equal((err as IngestionError).code, "AUTH");
  t.match((err as IngestionError).message, /^login failed: supplier answered HTTP 401/);
  const stats = sim.stats("etm");
  t.equal(stats.logins, 1, "one login request, not retried");
  t.equal(stats.requests, 1, "no catalog request");
  t.equal(logins(await c.metrics.registry.metrics(), "failed"), 1);
  assertNoSecrets(t, c.lines, ["wrong-password-1234"]);
});

t.test("session: a login response without the token fails AUTH after one login request", async (t) => {
  const sim = await simulator(t, "etm", etmSim());
  const c = buildConnector(t, etmDefinition(sim.baseUrl("etm"), { token: { path: "data.sid" } }), {
    readSecretEnv,
  });
  const err = await walkError(c.connector, walkContext(c.log));
  t.equal((err as IngestionError).code, "AUTH");
  t.match((err as IngestionError).message, /no token at data\.sid/);
  t.equal(sim.stats("etm").logins, 1);
});

t.test("session: a login answered 503 is retried like any request", async (t) => {
  const sim = await simulator(t, "etm", etmSim({ failLogins: { status: 503, times: 1 } }));
  const c = buildConnector(t, etmDefinition(sim.baseUrl("etm")), { readSecretEnv });
  const pages = await collectPages(c.connector, walkContext(c.log));
  t.equal(pages.flatMap((p) => p.offers).length, 100);
  t.equal(sim.stats("etm").logins, 2);
  t.equal(pages[0]?.httpAttempts, 3, "the first step counts both logins and its page");
  const metrics = await c.metrics.registry.metrics();
  t.equal(logins(metrics, "ok"), 1, "one login, which took a retry");
  t.equal(logins(metrics, "failed"), 0);
  t.match(metrics, /ingestion_http_retries_total\{supplier="acme",reason="http_503"\} 1/);
});

t.test("session: token from a header, sent as a header with a prefix", async (t) => {
  const sim = await simulator(
    t,
    "etm",
    etmSim({
      tokenIn: { header: "X-Session-Token" },
      sendAs: { header: "Authorization", prefix: "Session " },
      expiredAs: "401",
      expireAfterRequests: 4,
    }),
  );
  const def = etmDefinition(sim.baseUrl("etm"), {
    token: { header: "X-Session-Token" },
    send: { header: "Authorization", prefix: "Session " },
    expiredWhen: [{ status: [401] }],
  });
  const c = buildConnector(t, def, { readSecretEnv });
  const pages = await collectPages(c.connector, walkContext(c.log));
  t.equal(pages.flatMap((p) => p.offers).length, 100);
  t.equal(sim.stats("etm").logins, 2, "expired once (HTTP 401), one extra login");
  assertNoSecrets(t, c.lines, sim.stats("etm").issuedTokens);
});

t.test("session: form login that sets a cookie, sent back as a cookie (IEK bp)", async (t) => {
  const sim = await simulator(t, "bp", {
    size: 45,
    pageSize: 20,
    auth: {
      type: "session",
      loginPath: "/oauth/login",
      credentialsIn: "form",
      credentials: { login: LOGIN, password: PASSWORD },
      tokenIn: { cookie: "BPSESSID" },
      sendAs: { cookie: "BPSESSID" },
    },
  });
  const def = simDefinition(sim.baseUrl("bp"), {
    request: { path: "/v1/offers", query: { limit: "20" }, headers: { cookie: "lang=ru" } },
    auth: {
      type: "session",
      login: {
        method: "POST",
        path: "/oauth/login",
        form: { login: { env: "ETM_LOGIN" }, password: { env: "ETM_PASSWORD" } },
      },
      token: { cookie: "BPSESSID" },
      send: { cookie: "BPSESSID" },
    },
  });
  const c = buildConnector(t, def, { readSecretEnv });
  const pages = await collectPages(c.connector, walkContext(c.log));
  t.equal(pages.flatMap((p) => p.offers).length, 45);
  t.equal(sim.stats("bp").logins, 1);
});

t.test("session: login values from a JSON body; expiry after a time", async (t) => {
  // The simulator's sessions expire 150 ms after login on a manual clock: time passes
  // once, after the first page, however slow the requests are.
  const clock = new ManualClock(Date.now());
  const sim = await simulator(
    t,
    "etm",
    { ...etmSim({ credentialsIn: "json", expireAfterMs: 150, expiredAs: "401" }), faults: { latencyMs: 40 } },
    clock,
  );
  const def = etmDefinition(sim.baseUrl("etm"), {
    login: {
      method: "POST",
      path: "/api/v1/user/login",
      body: { log: { env: "ETM_LOGIN" }, pwd: { env: "ETM_PASSWORD" }, remember: true },
    },
    expiredWhen: [{ status: [401] }],
  });
  const c = buildConnector(t, def, { readSecretEnv });
  let offers = 0;
  let seq = 0;
  for await (const page of c.connector.walk(walkContext(c.log))) {
    offers += page.offers.length;
    if (++seq === 1) {
      t.equal(sim.stats("etm").expiredRequests, 0, "no expiry before the session's time is up");
      await clock.advance(200);
    }
  }
  t.equal(offers, 100);
  const stats = sim.stats("etm");
  t.equal(stats.expiredRequests, 1, "the session expired once during the walk");
  t.equal(stats.logins, 2, "the expiry cost exactly one login");
});

t.test("session: a missing login secret is AUTH before any request, naming the key", async (t) => {
  const sim = await simulator(t, "etm", etmSim());
  const c = buildConnector(t, etmDefinition(sim.baseUrl("etm")), { readSecretEnv: () => undefined });
  const err = await walkError(c.connector, walkContext(c.log));
  t.equal((err as IngestionError).code, "AUTH");
  t.match((err as IngestionError).message, /auth\.login\.query\.log: environment variable ETM_LOGIN/);
  t.equal(sim.stats("etm").requests, 0);
});

const oauthSim = (extra: Record<string, unknown> = {}): SimulatorSupplierOptions => ({
  size: 100,
  pageSize: 20,
  auth: {
    type: "oauth2",
    tokenPath: "/oauth/token",
    clientId: "se-client",
    clientSecret: "se-client-secret-77aa",
    ...extra,
  },
});
const oauthEnv: Record<string, string> = { SE_ID: "se-client", SE_SECRET: "se-client-secret-77aa" };

function oauthDefinition(baseUrl: string, extra: Record<string, unknown> = {}) {
  return simDefinition(baseUrl, {
    request: { path: "/v1/offers", query: { limit: "20" } },
    auth: {
      type: "oauth2",
      tokenPath: "/oauth/token",
      clientIdEnv: "SE_ID",
      clientSecretEnv: "SE_SECRET",
      scope: "catalog",
      ...extra,
    },
  });
}

t.test("oauth2: renewed once on a 401 mid-walk, in the form or with HTTP Basic", async (t) => {
  for (const clientAuth of ["body", "basic"]) {
    const sim = await simulator(t, "se", oauthSim({ expireAfterRequests: 4 }));
    const c = buildConnector(t, oauthDefinition(sim.baseUrl("se"), { clientAuth }), {
      readSecretEnv: (n) => oauthEnv[n],
    });
    const pages = await collectPages(c.connector, walkContext(c.log));
    t.equal(pages.flatMap((p) => p.offers).length, 100, `${clientAuth}: every offer`);
    t.equal(sim.stats("se").logins, 2, `${clientAuth}: one renewal`);
    t.equal(logins(await c.metrics.registry.metrics(), "ok"), 2);
    assertNoSecrets(t, c.lines, ["se-client-secret-77aa", ...sim.stats("se").issuedTokens]);
  }
});

t.test("oauth2: the token is cached until 90 % of expires_in", async (t) => {
  // One manual clock for the connector and the simulator (which refuses the token 1 s after
  // issuing it): 920 ms on is past 90 % of expires_in, still before the server's expiry.
  const clock = new ManualClock(Date.now());
  const sim = await simulator(t, "se", oauthSim({ expiresInSeconds: 1 }), clock);
  const c = buildConnector(t, oauthDefinition(sim.baseUrl("se")), {
    readSecretEnv: (n) => oauthEnv[n],
    clock,
  });
  await collectPages(c.connector, walkContext(c.log));
  await collectPages(c.connector, walkContext(c.log));
  t.equal(sim.stats("se").logins, 1, "cached across walks");
  await clock.advance(899);
  await collectPages(c.connector, walkContext(c.log));
  t.equal(sim.stats("se").logins, 1, "1 ms short of 90 % of expires_in, the token is reused");
  await clock.advance(21);
  await collectPages(c.connector, walkContext(c.log));
  t.equal(sim.stats("se").logins, 2, "renewed after 90 % of expires_in");
  t.equal(sim.stats("se").expiredRequests, 0, "before the server refused it");
});

t.test("oauth2: a wrong client secret fails AUTH after one token request", async (t) => {
  const sim = await simulator(t, "se", oauthSim());
  const c = buildConnector(t, oauthDefinition(sim.baseUrl("se")), {
    readSecretEnv: (n) => (n === "SE_SECRET" ? "not-the-secret" : oauthEnv[n]),
  });
  const err = await walkError(c.connector, walkContext(c.log));
  t.equal((err as IngestionError).code, "AUTH");
  t.equal(sim.stats("se").logins, 1);
  t.equal(sim.stats("se").requests, 1);
});

t.test("query key: on every request to the supplier's origin, never to another", async (t) => {
  const key = env.SYSTEME_KEY as string;
  const mirror = await startSimulator({
    suppliers: { mirror: { size: 60, pageSize: 20, pagination: "link" } },
  });
  t.teardown(() => mirror.close());
  const sim = await simulator(t, "systeme", {
    size: 60,
    pageSize: 20,
    pagination: "link",
    auth: { type: "query", param: "accessCode", value: key },
  });
  const def = simDefinition(sim.baseUrl("systeme"), {
    request: { path: "/v1/offers", query: { limit: "20" } },
    pagination: { type: "link" },
    auth: { type: "query", param: "accessCode", valueEnv: "SYSTEME_KEY" },
  });
  const c = buildConnector(t, def, { readSecretEnv });
  const pages = await collectPages(c.connector, walkContext(c.log));
  t.equal(pages.flatMap((p) => p.offers).length, 60);
  t.ok(
    sim.stats("systeme").urls.every((u) => u.includes(`accessCode=${key}`)),
    "every request carried accessCode",
  );

  // The same key, with the second page on another allowed origin: that origin never sees it.
  sim.setFaults("systeme", { linkTo: `${mirror.baseUrl("mirror")}/v1/offers?page=2&limit=20` });
  sim.resetStats("systeme");
  const def2 = simDefinition(sim.baseUrl("systeme"), {
    request: { path: "/v1/offers", query: { limit: "20" } },
    pagination: { type: "link" },
    allowedOrigins: [mirror.url],
    auth: { type: "query", param: "accessCode", valueEnv: "SYSTEME_KEY" },
  });
  const c2 = buildConnector(t, def2, { readSecretEnv });
  await collectPages(c2.connector, walkContext(c2.log));
  const mirrorUrls = mirror.stats("mirror").urls;
  t.ok(mirrorUrls.length >= 2, "pages were fetched from the other origin");
  t.ok(
    mirrorUrls.every((u) => !u.includes("accessCode")),
    "the key never went to the other origin",
  );
  assertNoSecrets(t, [...c.lines, ...c2.lines], [key]);
});

t.test("query key: a wrong key is AUTH after one request", async (t) => {
  const sim = await simulator(t, "systeme", {
    size: 10,
    auth: { type: "query", param: "accessCode", value: "the-right-key" },
  });
  const def = simDefinition(sim.baseUrl("systeme"), {
    auth: { type: "query", param: "accessCode", valueEnv: "SYSTEME_KEY" },
  });
  const c = buildConnector(t, def, { readSecretEnv });
  const err = await walkError(c.connector, walkContext(c.log));
  t.equal((err as IngestionError).code, "AUTH");
  t.equal(sim.stats("systeme").requests, 1);
  t.notOk((err as Error).message.includes(env.SYSTEME_KEY as string));
});

t.test("session: errors rules apply to the login answer too", async (t) => {
  // The supplier answers the login 200 with its own error code: the ETM rule fails it SUPPLIER.
  const sim = await simulator(t, "etm", etmSim({ tokenIn: { body: "data.sid" } }));
  const def = etmDefinition(
    sim.baseUrl("etm"),
    {},
    {
      errors: [
        {
          path: "data.session",
          exists: false,
          then: "fail",
          code: "SUPPLIER",
          messagePath: "status.message",
        },
      ],
    },
  );
  const c = buildConnector(t, def, { readSecretEnv });
  const err = (await walkError(c.connector, walkContext(c.log))) as IngestionError;
  t.equal(err.code, "SUPPLIER");
  t.match(err.message, /^login failed: supplier reported an error \(data\.session = missing\): OK/);
  t.equal(sim.stats("etm").logins, 1);
});
