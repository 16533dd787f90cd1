import t from "tap";
import { operatorSizedHeap } from "./heap.js";

t.test("the operator's own heap flags win over the worker's growth setting", async (t) => {
  t.equal(operatorSizedHeap([], undefined), false);
  t.equal(operatorSizedHeap(["--enable-source-maps"], "--dns-result-order=ipv4first"), false);
  t.equal(operatorSizedHeap(["--max-old-space-size=512"], undefined), true);
  t.equal(operatorSizedHeap([], "--max_old_space_size=512"), true);
  t.equal(operatorSizedHeap([], "--heap-growing-percent=50"), true);
  t.equal(operatorSizedHeap(["--optimize-for-size"], ""), true);
});
