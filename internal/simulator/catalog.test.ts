import t from "tap";
import { Catalog, invalidKindOf, skuOf } from "./catalog.js";
import { TokenBucket } from "./rate-limit.js";
import { renamePath } from "./supplier.js";

t.test("records are deterministic and well formed", async (t) => {
  const a = new Catalog("etm", 1000);
  const b = new Catalog("etm", 1000);
  t.same(a.slice(0, 1000), b.slice(0, 1000), "same supplier and size give the same catalog");
  const other = new Catalog("iek", 1000).slice(0, 10);
  t.not(other[0]?.price.value, undefined);
  t.notSame(
    a.slice(0, 10).map((r) => r.price.value),
    other.map((r) => r.price.value),
    "prices depend on the supplier",
  );
  for (const r of a.slice(0, 1000)) {
    t.match(r.price.value, /^\d+\.\d{2}$/);
    t.equal(r.price.currency, "EUR");
    t.ok(Number.isInteger(r.stock.total) && r.stock.total >= 0);
  }
  t.equal(a.slice(0, 1)[0]?.article, "ETM-0000000");
  t.equal(skuOf("iek", 1234567), "IEK-1234567");
});

t.test("slice is exact at the edges", async (t) => {
  const c = new Catalog("x", 10);
  t.equal(c.slice(0, 100).length, 10);
  t.equal(c.slice(8, 100).length, 2);
  t.equal(c.slice(10, 20).length, 0);
  t.equal(new Catalog("x", 0).slice(0, 10).length, 0);
});

t.test("mutations are deterministic and cumulative", async (t) => {
  const c = new Catalog("etm", 100);
  const before = c.slice(0, 100);
  c.changePrices(5);
  const after = c.slice(0, 100);
  const changed = after.filter((r, i) => r.price.value !== before[i]?.price.value).map((r) => r.article);
  t.same(
    changed,
    [0, 1, 2, 3, 4].map((i) => skuOf("etm", i)),
    "first k offers change price",
  );
  c.changePrices(3);
  const changed2 = c
    .slice(0, 100)
    .filter((r, i) => r.price.value !== after[i]?.price.value)
    .map((r) => r.article);
  t.same(
    changed2,
    [5, 6, 7].map((i) => skuOf("etm", i)),
    "the next k in rotation",
  );

  c.remove(10);
  t.equal(c.liveCount, 90);
  t.equal(c.slice(0, 1000).at(-1)?.article, skuOf("etm", 89));
  c.add(4);
  t.equal(c.liveCount, 94);
  t.same(
    c.slice(90, 94).map((r) => r.article),
    [100, 101, 102, 103].map((i) => skuOf("etm", i)),
    "added offers get new indices, never reused",
  );
  c.remove(6);
  t.equal(c.slice(0, 1000).at(-1)?.article, skuOf("etm", 87), "remove spans segments");

  c.mutate({ reset: true });
  t.same(c.slice(0, 1000), before, "reset returns the pristine catalog");
});

t.test("price rotation wraps around the live catalog", async (t) => {
  const c = new Catalog("w", 3);
  const v0 = c.slice(0, 3).map((r) => r.price.value);
  c.changePrices(4);
  const v1 = c.slice(0, 3).map((r) => r.price.value);
  t.ok(
    v1.every((v, i) => v !== v0[i]),
    "every offer changed",
  );
  const first = new Catalog("w", 3);
  first.changePrices(2);
  first.changePrices(2);
  t.same(first.slice(0, 3), c.slice(0, 3), "2 + 2 changes rotate like 4");
  t.not(first.recordOf(0).price.value, new Catalog("w", 3).slice(0, 1)[0]?.price.value);
});

t.test("invalidKindOf marks exactly floor(n × rate), rotating kinds", async (t) => {
  const kinds = Array.from({ length: 1000 }, (_, i) => invalidKindOf(i, 0.1)).filter((k) => k !== null);
  t.equal(kinds.length, 100);
  t.same(new Set(kinds), new Set(["missing-article", "bad-price", "bad-currency", "negative-stock"]));
  t.equal(invalidKindOf(5, 0), null);
  t.equal(Array.from({ length: 10 }, (_, i) => invalidKindOf(i, 1)).filter((k) => k !== null).length, 10);
});

t.test("renamePath moves a value between dot paths", async (t) => {
  t.same(renamePath({ article: "A", x: 1 }, "article", "sku_code"), { x: 1, sku_code: "A" });
  t.same(renamePath({ price: { value: "1.00" } }, "price.value", "cost.amount"), {
    price: {},
    cost: { amount: "1.00" },
  });
  t.same(renamePath({ a: 1 }, "missing", "b"), { a: 1 }, "absent field: unchanged");
});

t.test("token bucket: burst, then refill at the rate", async (t) => {
  let now = 1_000;
  const bucket = new TokenBucket(2, 3, () => now);
  t.same([bucket.tryTake(), bucket.tryTake(), bucket.tryTake(), bucket.tryTake()], [true, true, true, false]);
  now += 499;
  t.equal(bucket.tryTake(), false, "not yet one token");
  now += 1;
  t.equal(bucket.tryTake(), true, "one token after 500 ms at 2/s");
  now += 60_000;
  t.same([bucket.tryTake(), bucket.tryTake(), bucket.tryTake(), bucket.tryTake()], [true, true, true, false]);
});

t.test("changeStock moves the stock of k offers from the end, prices untouched", async (t) => {
  const c = new Catalog("iek", 10);
  const before = c.slice(0, 10);
  c.changeStock(3);
  const after = c.slice(0, 10);
  const changed = after.filter((r, i) => r.stock.total !== before[i]?.stock.total).map((r) => r.article);
  t.same(changed, ["IEK-0000009", "IEK-0000008", "IEK-0000007"].sort());
  t.same(
    after.map((r) => r.price.value),
    before.map((r) => r.price.value),
    "prices unchanged",
  );
  t.ok(after.every((r) => Number.isInteger(r.stock.total) && r.stock.total >= 0 && r.stock.total < 1000));
  c.mutate({ reset: true });
  t.same(c.slice(0, 10), before, "reset restores the stock");
});

t.test("an offer's price counts as changed once changePrices or setPrices touched it", async (t) => {
  const c = new Catalog("iek", 5);
  t.notOk(c.priceChanged(0));
  c.changePrices(1);
  t.ok(c.priceChanged(0));
  t.notOk(c.priceChanged(1));
  c.setPrices({ "IEK-0000002": "1.00" });
  t.ok(c.priceChanged(2));
});
