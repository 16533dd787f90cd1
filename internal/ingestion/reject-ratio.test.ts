import t from "tap";
import type { Offer, Reject } from "./ports.js";
import { rejectRatioExceeded } from "./reject-ratio.js";

const offers = (n: number) =>
  Array.from(
    { length: n },
    (_, i): Offer => ({ sku: `S${i}`, name: null, price: null, currency: null, stock: null }),
  );
const rejects = (n: number) => Array.from({ length: n }, (_, i): Reject => ({ reason: `bad ${i}`, raw: i }));

t.test(
  "a step over maxRejectRatio fails with a message naming the counts, the step and the first reason",
  async (t) => {
    t.equal(
      rejectRatioExceeded({ seq: 3, offers: offers(1), rejects: rejects(3) }, 0.5),
      "3 of 4 records invalid on step 3 (maxRejectRatio 0.5); first: bad 0",
    );
    t.equal(
      rejectRatioExceeded({ seq: 1, offers: [], rejects: rejects(1) }, 0),
      "1 of 1 records invalid on step 1 (maxRejectRatio 0); first: bad 0",
    );
  },
);

t.test("at the ratio exactly, below it, and an empty step: no failure", async (t) => {
  t.equal(
    rejectRatioExceeded({ seq: 1, offers: offers(2), rejects: rejects(2) }, 0.5),
    null,
    "2 of 4 at 0.5",
  );
  t.equal(rejectRatioExceeded({ seq: 1, offers: offers(3), rejects: rejects(1) }, 0.5), null);
  t.equal(rejectRatioExceeded({ seq: 1, offers: [], rejects: [] }, 0), null, "no records");
  t.equal(
    rejectRatioExceeded({ seq: 1, offers: offers(1), rejects: rejects(99) }, 1),
    null,
    "1 allows every reject",
  );
});
