import t from "tap";
import { skuOf } from "./catalog.js";
import { startSimulator } from "./server.js";
import { getJson, httpRequest, type ServedItem } from "./test-support.js";
import type { Simulator } from "./types.js";

/** Walks `supplier` the way a client of `type` would; returns SKUs in order and the request count. */
async function walk(sim: Simulator, supplier: string, type: string, limit = 100) {
  const base = `${sim.baseUrl(supplier)}/v1/offers`;
  const skus: string[] = [];
  let requests = 0;
  const take = (items: ServedItem[]) => {
    for (const r of items) skus.push(r.article ?? "<missing>");
    return items.length;
  };
  if (type === "none") {
    requests++;
    take((await getJson(base)).json.data.items);
  } else if (type === "page") {
    for (let page = 1; ; page++) {
      requests++;
      if (take((await getJson(`${base}?page=${page}&limit=${limit}`)).json.data.items) === 0) break;
    }
  } else if (type === "offset") {
    for (let offset = 0; ; offset += limit) {
      requests++;
      if (take((await getJson(`${base}?offset=${offset}&limit=${limit}`)).json.data.items) < limit) break;
    }
  } else if (type === "cursor") {
    let cursor: string | null = null;
    do {
      requests++;
      const url: string =
        cursor === null ? `${base}?limit=${limit}` : `${base}?limit=${limit}&cursor=${cursor}`;
      const { json } = await getJson(url);
      take(json.data.items);
      cursor = json.next_cursor ?? null;
    } while (cursor !== null);
  } else if (type === "link") {
    let next: string | null = `${base}?limit=${limit}`;
    while (next !== null) {
      requests++;
      const res = await httpRequest(next);
      take(JSON.parse(res.body).data.items);
      const link = res.headers.link as string | undefined;
      const m = link ? /^<([^>]+)>; rel="next"$/.exec(link) : null;
      next = m ? new URL(m[1]!, next).toString() : null;
    }
  }
  return { skus, requests };
}

const expected = (name: string, n: number) => Array.from({ length: n }, (_, i) => skuOf(name, i));

t.test("every pagination type serves every SKU exactly once and counts one walk", async (t) => {
  const sim = await startSimulator({
    suppliers: {
      pg: { size: 250, pagination: "page" },
      off: { size: 250, pagination: "offset" },
      cur: { size: 250, pagination: "cursor" },
      lnk: { size: 250, pagination: "link" },
      all: { size: 250, pagination: "none" },
    },
  });
  t.teardown(() => sim.close());
  const cases: [string, string, number][] = [
    ["pg", "page", 4], // 100, 100, 50, then the empty page
    ["off", "offset", 3],
    ["cur", "cursor", 3],
    ["lnk", "link", 3],
    ["all", "none", 1],
  ];
  for (const [name, type, requests] of cases) {
    const result = await walk(sim, name, type);
    t.same(result.skus, expected(name, 250), `${type}: every SKU once, in order`);
    t.equal(result.requests, requests, `${type}: request count`);
    const stats = sim.stats(name);
    t.equal(stats.requests, requests);
    t.same(stats.byStatus, { 200: requests });
    t.equal(stats.walksStarted, 1, `${type}: one walk started`);
    t.equal(stats.walksCompleted, 1, `${type}: one walk completed`);
    t.equal(stats.walks.length, 1);
    t.ok(stats.walks[0]!.endedAt! >= stats.walks[0]!.startedAt);
  }
});

t.test("offset: a catalog that is a multiple of limit ends with an empty page", async (t) => {
  const sim = await startSimulator({ suppliers: { off: { size: 200, pagination: "offset", pageSize: 50 } } });
  t.teardown(() => sim.close());
  const result = await walk(sim, "off", "offset", 50);
  t.same(result.skus, expected("off", 200));
  t.equal(result.requests, 5, "4 full pages and a final empty one");
  t.equal(sim.stats("off").walksCompleted, 1);
});

t.test("defaults: page pagination with pageSize 100; page past the end is empty", async (t) => {
  const sim = await startSimulator({ suppliers: { d: { size: 150 } } });
  t.teardown(() => sim.close());
  const base = `${sim.baseUrl("d")}/v1/offers`;
  t.equal((await getJson(base)).json.data.items.length, 100);
  t.equal((await getJson(`${base}?page=2`)).json.data.items.length, 50);
  t.same((await getJson(`${base}?page=9`)).json, { data: { items: [] } });
  const bad = await getJson(`${base}?page=0`);
  t.equal(bad.status, 400, "page 0 is a bad request");
  t.equal((await getJson(`${base}?limit=abc`)).status, 400);
  const cursorSim = await startSimulator({ suppliers: { c: { size: 10, pagination: "cursor" } } });
  t.teardown(() => cursorSim.close());
  t.equal((await getJson(`${cursorSim.baseUrl("c")}/v1/offers?cursor=garbage`)).status, 400);
});

t.test("unknown supplier and unknown path answer 404 JSON", async (t) => {
  const sim = await startSimulator({ suppliers: { a: { size: 1 } } });
  t.teardown(() => sim.close());
  const res = await httpRequest(`${sim.url}/nope/v1/offers`);
  t.equal(res.status, 404);
  t.match(res.headers["content-type"], /application\/json/);
  t.equal(JSON.parse(res.body).error, "not found");
  t.equal((await httpRequest(`${sim.url}/a/v2/offers`)).status, 404);
});

t.test("schema drift and invalid records are served as configured", async (t) => {
  const sim = await startSimulator({
    suppliers: {
      drift: { size: 5, renameField: { from: "article", to: "sku_code" } },
      bad: { size: 100, invalidRate: 0.2 },
    },
  });
  t.teardown(() => sim.close());
  const drift = (await getJson(`${sim.baseUrl("drift")}/v1/offers`)).json.data.items;
  t.equal(drift[0]?.sku_code, "DRIFT-0000000");
  t.notOk(drift[0] && "article" in drift[0]);
  const items = (await getJson(`${sim.baseUrl("bad")}/v1/offers`)).json.data.items;
  const invalid = items.filter(
    (r) => !("article" in r) || r.price.value === "abc" || r.price.currency === "EURO" || r.stock.total < 0,
  );
  t.equal(invalid.length, 20, "exactly 20% invalid");
  t.equal(items.filter((r) => !("article" in r)).length, 5, "kinds rotate evenly");
  t.equal(items.filter((r) => r.price.value === "abc").length, 5);
  t.equal(items.filter((r) => r.price.currency === "EURO").length, 5);
  t.equal(items.filter((r) => r.stock.total < 0).length, 5);
});

t.test("mutations show up in served pages", async (t) => {
  const sim = await startSimulator({ suppliers: { m: { size: 20, pagination: "none" } } });
  t.teardown(() => sim.close());
  const url = `${sim.baseUrl("m")}/v1/offers`;
  const before = (await getJson(url)).json.data.items;
  sim.mutate("m", { changePrices: 3, remove: 2, add: 5 });
  const after = (await getJson(url)).json.data.items;
  t.equal(after.length, 23);
  t.same(
    sim.offers("m").map((r) => r.article),
    after.map((r) => r.article),
    "offers() matches what is served",
  );
  t.equal(sim.liveCount("m"), 23);
  const changed = after.filter((r, i) => i < 18 && r.price.value !== before[i]?.price.value);
  t.equal(changed.length, 3);
  t.equal(after.at(-1)?.article, "M-0000024", "new offers are new SKUs");
  t.notOk(
    after.some((r) => r.article === "M-0000019"),
    "removed from the end",
  );
  sim.mutate("m", { reset: true });
  t.same((await getJson(url)).json.data.items, before);
});

t.test("a 1M-offer catalog serves 5,000-record pages fast", async (t) => {
  const sim = await startSimulator({ suppliers: { big: { size: 1_000_000, pageSize: 5000 } } });
  t.teardown(() => sim.close());
  sim.mutate("big", { changePrices: 10_000, remove: 10, add: 10 });
  const started = performance.now();
  let records = 0;
  for (const page of [1, 50, 100, 150, 200]) {
    const { json } = await getJson(`${sim.baseUrl("big")}/v1/offers?page=${page}`);
    records += json.data.items.length;
  }
  const perSecond = records / ((performance.now() - started) / 1000);
  t.equal(records, 25_000);
  t.comment(`served ${Math.round(perSecond)} records/s`);
  t.ok(perSecond > 20_000, `at least 20k records/s (got ${Math.round(perSecond)})`);
});
