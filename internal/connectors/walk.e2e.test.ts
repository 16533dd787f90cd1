// Every pagination type and every auth type walks a multi-page simulator catalog
// exactly once and yields every offer; secrets never reach the logs.
import t from "tap";
import { type SimAuth, type SimPagination, startSimulator } from "../simulator/index.js";
import { buildConnector, collectPages, simDefinition, walkContext, walkError } from "./test-support.js";

const SIZE = 250;
const PAGE_SIZE = 40;

const paginations: { sim: SimPagination; def: Record<string, unknown>; query?: Record<string, string> }[] = [
  { sim: "none", def: { type: "none" } },
  { sim: "page", def: { type: "page", param: "page", start: 1 }, query: { limit: String(PAGE_SIZE) } },
  { sim: "offset", def: { type: "offset", offsetParam: "offset", limitParam: "limit", limit: PAGE_SIZE } },
  {
    sim: "cursor",
    def: { type: "cursor", param: "cursor", cursorPath: "next_cursor" },
    query: { limit: String(PAGE_SIZE) },
  },
  { sim: "link", def: { type: "link" }, query: { limit: String(PAGE_SIZE) } },
];

t.test("each pagination type walks the whole catalog exactly once", async (t) => {
  const sim = await startSimulator();
  t.teardown(() => sim.close());
  for (const p of paginations) {
    await t.test(p.sim, async (t) => {
      const name = `p-${p.sim}`;
      sim.configure(name, { size: SIZE, pageSize: PAGE_SIZE, pagination: p.sim });
      const { connector, log, metrics } = buildConnector(
        t,
        simDefinition(sim.baseUrl(name), {
          pagination: p.def,
          request: { path: "/v1/offers", query: p.query ?? {} },
        }),
      );
      const pages = await collectPages(connector, walkContext(log));
      const skus = pages.flatMap((pg) => pg.offers.map((o) => o.sku));
      t.same(
        skus,
        sim.offers(name).map((o) => o.article),
        "every offer, in order",
      );
      t.equal(new Set(skus).size, SIZE, "no duplicates");
      t.same(
        pages.map((pg) => pg.seq),
        pages.map((_, i) => i + 1),
        "seq is 1-based and consecutive",
      );
      t.ok(
        pages.every((pg) => pg.httpAttempts === 1),
        "one request per page",
      );
      const stats = sim.stats(name);
      t.equal(stats.walksCompleted, 1, "one complete walk");
      t.equal(stats.requests, pages.length, "no extra request");
      t.ok(stats.maxConcurrency <= 2, "prefetch keeps at most page+1 in flight");
      const requests = await metrics.httpRequests.get();
      t.equal(
        requests.values.find((v) => v.labels.code === "200")?.value,
        pages.length,
        "httpRequests counted",
      );
      t.equal(
        pages[0]?.offers[0]?.price,
        sim.offers(name)[0]?.price.value,
        "price kept as the decimal string",
      );
    });
  }
});

const auths: {
  sim: SimAuth;
  def: Record<string, unknown>;
  env: Record<string, string>;
  secrets: string[];
}[] = [
  { sim: { type: "none" }, def: { type: "none" }, env: {}, secrets: [] },
  {
    sim: { type: "bearer", token: "tok-Secret-123456" },
    def: { type: "bearer", tokenEnv: "ACME_TOKEN" },
    env: { ACME_TOKEN: "tok-Secret-123456" },
    secrets: ["tok-Secret-123456"],
  },
  {
    sim: { type: "header", name: "X-Api-Key", value: "key-Secret-abcdef" },
    def: { type: "header", name: "X-Api-Key", valueEnv: "ACME_KEY" },
    env: { ACME_KEY: "key-Secret-abcdef" },
    secrets: ["key-Secret-abcdef"],
  },
  {
    sim: { type: "basic", username: "acme-user", password: "pw-Secret-987654" },
    def: { type: "basic", usernameEnv: "ACME_USER", passwordEnv: "ACME_PASS" },
    env: { ACME_USER: "acme-user", ACME_PASS: "pw-Secret-987654" },
    secrets: ["pw-Secret-987654", Buffer.from("acme-user:pw-Secret-987654").toString("base64")],
  },
];

t.test("each auth type walks the whole catalog; secrets never appear in logs", async (t) => {
  const sim = await startSimulator();
  t.teardown(() => sim.close());
  for (const a of auths) {
    await t.test(a.sim.type, async (t) => {
      const name = `a-${a.sim.type}`;
      sim.configure(name, { size: SIZE, pageSize: PAGE_SIZE, pagination: "page", auth: a.sim });
      // One 503 per walk so the retry path logs too.
      sim.setFaults(name, { status: { code: 503, onPage: 2, times: 1 } });
      const { connector, log, lines } = buildConnector(t, simDefinition(sim.baseUrl(name), { auth: a.def }), {
        readSecretEnv: (n) => a.env[n],
      });
      log.trace({ headers: { authorization: `Bearer ${a.secrets[0] ?? ""}` } }, "trace line with a header");
      const pages = await collectPages(connector, walkContext(log));
      t.equal(
        pages.reduce((n, pg) => n + pg.offers.length, 0),
        SIZE,
        "every offer",
      );
      t.equal(sim.stats(name).walksCompleted, 1);
      t.equal(sim.stats(name).byStatus[401] ?? 0, 0, "never unauthorised");
      t.ok(
        lines.some((l) => l.includes("retrying")),
        "a retry line was logged",
      );
      for (const secret of a.secrets) {
        t.notOk(
          lines.some((l) => l.includes(secret)),
          `secret ${secret.slice(0, 4)}… absent from ${lines.length} log lines`,
        );
      }
    });
  }

  await t.test("wrong credentials: AUTH after exactly one request", async (t) => {
    sim.configure("a-wrong", { size: SIZE, auth: { type: "bearer", token: "right-token" } });
    const { connector, log } = buildConnector(
      t,
      simDefinition(sim.baseUrl("a-wrong"), { auth: { type: "bearer", tokenEnv: "T" } }),
      { readSecretEnv: () => "wrong-token" },
    );
    const err = (await walkError(connector, walkContext(log))) as { code: string; attempts: number };
    t.equal(err.code, "AUTH");
    t.equal(err.attempts, 1);
    t.equal(sim.stats("a-wrong").requests, 1);
  });

  await t.test("a missing secret is AUTH before any request", async (t) => {
    sim.configure("a-missing", { size: SIZE });
    const { connector, log } = buildConnector(
      t,
      simDefinition(sim.baseUrl("a-missing"), { auth: { type: "bearer", tokenEnv: "UNSET_TOKEN" } }),
    );
    const err = (await walkError(connector, walkContext(log))) as { code: string; message: string };
    t.equal(err.code, "AUTH");
    t.match(err.message, /UNSET_TOKEN/);
    t.equal(sim.stats("a-missing").requests, 0);
  });
});
