// Console actions (docs/operations.md, Console actions) against the real loopback server and a real
// database: login with the admin token, a session cookie HttpOnly and SameSite=Strict, and every
// refusal of a POST (no cookie, wrong token, wrong CSRF token, foreign Origin, cross-site fetch,
// replayed form after logout) is a 403 that changes nothing; without the token, nothing changes.
import type pg from "pg";
import t from "tap";
import { createTestDatabase, testPool } from "../../../test/helpers/db.js";
import { pauseSupplier, readControls, requestTrigger, resumeSupplier } from "../../control/controls.js";
import { createMetrics } from "../../observability/metrics.js";
import { ManualClock } from "../../platform/clock.js";
import { SecretRegistry } from "../../platform/redact.js";
import { createHealthServer } from "../server.js";
import { captureLogger, type Teardown } from "../test-support.js";
import { seedScene } from "./test-support.js";

const NOW = Date.parse("2026-03-01T12:00:00Z");
const TOKEN = "s3cret-admin-token-for-tests";

async function start(t: Teardown, admin: boolean): Promise<{ origin: string; db: pg.Pool }> {
  const db = testPool(t, await createTestDatabase(t));
  const scene = await seedScene(db, NOW);
  const server = createHealthServer({
    secrets: new SecretRegistry(),
    host: "127.0.0.1",
    port: 0,
    db,
    suppliers: scene.suppliers,
    metrics: createMetrics({ processMetrics: false }),
    log: captureLogger().log,
    clock: new ManualClock(NOW),
    // The pause shows on the next page, not after the freshness cache's 5 s.
    freshnessCacheMs: 0,
    ...(admin
      ? {
          admin: {
            token: TOKEN,
            actions: {
              pause: (supplier: string, by: string) => pauseSupplier(db, { supplier, by }),
              resume: (supplier: string) => resumeSupplier(db, supplier),
              trigger: (supplier: string, by: string) => requestTrigger(db, { supplier, by }),
              decide: async () => {
                throw new Error("no held run in this scene");
              },
            },
          },
        }
      : {}),
  });
  t.teardown(() => server.stop());
  const { port } = await server.start();
  return { origin: `http://127.0.0.1:${port}`, db };
}

const form = (fields: Record<string, string>) => new URLSearchParams(fields).toString();

async function post(origin: string, path: string, body: string, headers: Record<string, string> = {}) {
  return fetch(`${origin}${path}`, {
    method: "POST",
    redirect: "manual",
    headers: { "content-type": "application/x-www-form-urlencoded", ...headers },
    body,
  });
}

async function pausedSuppliers(db: pg.Pool): Promise<string[]> {
  return [...(await readControls(db)).paused.keys()];
}

t.test("with the admin token: login, forms, CSRF and Origin checks, logout", async (t) => {
  const { origin, db } = await start(t, true);
  const login = await fetch(`${origin}/login`);
  t.equal(login.status, 200);
  t.match(await login.text(), /<form method="post" action="\/login">/);

  const wrong = await post(origin, "/login", form({ token: "not-the-token-at-all" }));
  t.equal(wrong.status, 403, "wrong token: 403");
  t.equal(wrong.headers.get("set-cookie"), null, "and no session");

  const ok = await post(origin, "/login", form({ token: TOKEN }), { origin });
  t.equal(ok.status, 303);
  const cookieHeader = ok.headers.get("set-cookie") ?? "";
  t.match(cookieHeader, /^ss_session=[A-Za-z0-9_-]{43}; HttpOnly; SameSite=Strict; Path=\//);
  const cookie = cookieHeader.split(";")[0] ?? "";

  const anonymous = await (await fetch(`${origin}/`)).text();
  t.notMatch(anonymous, /data-action="pause"/, "no forms without a session");
  const overview = await (await fetch(`${origin}/`, { headers: { cookie } })).text();
  t.match(overview, /action="\/actions\/pause\/etm"/, "pause form per supplier");
  t.match(overview, /action="\/actions\/trigger\/iek"/, "run-now form per supplier");
  const csrf = /name="csrf" value="([A-Za-z0-9_-]+)"/.exec(overview)?.[1] ?? "";
  t.ok(csrf.length > 20, "a CSRF token in the forms");

  const refusals: [string, Record<string, string>, string][] = [
    ["no cookie", {}, csrf],
    ["wrong CSRF token", { cookie }, "x".repeat(43)],
    ["no CSRF token", { cookie }, ""],
    ["foreign Origin", { cookie, origin: "http://evil.example" }, csrf],
    ["cross-site fetch", { cookie, "sec-fetch-site": "cross-site" }, csrf],
    ["Origin null without Sec-Fetch-Site", { cookie, origin: "null" }, csrf],
    ["unknown session", { cookie: `ss_session=${"A".repeat(43)}` }, csrf],
  ];
  for (const [why, headers, token] of refusals) {
    const r = await post(origin, "/actions/pause/etm", form(token ? { csrf: token } : {}), headers);
    t.equal(r.status, 403, `${why}: 403`);
  }
  t.same(await pausedSuppliers(db), [], "nothing was paused by any refused request");

  const paused = await post(origin, "/actions/pause/etm", form({ csrf }), {
    cookie,
    origin,
    "sec-fetch-site": "same-origin",
  });
  t.equal(paused.status, 303);
  t.equal(paused.headers.get("location"), "/");
  const controls = await readControls(db);
  t.equal(controls.paused.get("etm")?.pausedBy, "console", "recorded as console");
  const after = await (await fetch(`${origin}/`, { headers: { cookie } })).text();
  t.match(after, /action="\/actions\/resume\/etm"/, "a paused supplier offers resume");
  t.match(after, /data-status="paused"/);

  const trig = await post(origin, "/actions/trigger/iek", form({ csrf }), { cookie });
  t.equal(trig.status, 303);
  t.equal((await readControls(db)).pendingTriggers.get("iek"), 1);
  t.equal((await post(origin, "/actions/pause/nosuch", form({ csrf }), { cookie })).status, 404);

  const out = await post(origin, "/logout", form({ csrf }), { cookie });
  t.equal(out.status, 303);
  const replay = await post(origin, "/actions/resume/etm", form({ csrf }), { cookie });
  t.equal(replay.status, 403, "a form replayed after logout: 403");
  t.same(await pausedSuppliers(db), ["etm"], "and nothing changed");
});

t.test("without the admin token the console changes nothing", async (t) => {
  const { origin, db } = await start(t, false);
  t.equal((await fetch(`${origin}/login`)).status, 404);
  const r = await post(origin, "/actions/pause/etm", form({ csrf: "x" }));
  t.equal(r.status, 405);
  t.equal((await post(origin, "/login", form({ token: TOKEN }))).status, 405);
  t.notMatch(await (await fetch(`${origin}/`)).text(), /<form/);
  t.same(await pausedSuppliers(db), []);
});
