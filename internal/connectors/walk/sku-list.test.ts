// SKU files (docs/connectors.md, SKU lists): one SKU a line, blank lines and # comments ignored, repeated
// SKUs once in first-seen order, re-read each time; bad input named in the error.
import { mkdtemp, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import t from "tap";
import { connectorDefinitionSchema } from "../schema/connector-schema.js";
import { readSkuList } from "./sku-list.js";

function skusOf(raw: Record<string, unknown>) {
  const def = connectorDefinitionSchema.parse({
    baseUrl: "https://x.example",
    fields: { sku: "a", price: "b" },
    skus: raw,
  });
  if (!def.skus) throw new Error("no skus");
  return def.skus;
}

t.test("a SKU file", async (t) => {
  const dir = await mkdtemp(join(tmpdir(), "skus-"));
  const sources = { supplier: "acme", connectorsDir: dir, database: undefined, statementTimeoutMs: 1000 };
  await writeFile(join(dir, "s.txt"), "# header\r\nB2\n\n  A1  \nB2\n# A9\nC3\n");
  const skus = skusOf({ from: "file", file: "s.txt", batch: 2 });
  t.same(await readSkuList(skus, sources), ["B2", "A1", "C3"]);
  await writeFile(join(dir, "s.txt"), "Z9\n");
  t.same(await readSkuList(skus, sources), ["Z9"], "re-read every time");
  await writeFile(join(dir, "s.txt"), "A1\nB,2\n");
  await t.rejects(readSkuList(skus, sources), {
    code: "CONTRACT",
    message: /SKU "B,2" contains skus\.separator ","/,
  });
  t.same(
    await readSkuList(skusOf({ from: "file", file: "s.txt" }), sources),
    ["A1", "B,2"],
    "batch 1: no clash",
  );
  await t.rejects(readSkuList(skusOf({ from: "file", file: "none.txt" }), sources), {
    code: "CONTRACT",
    message: /skus\.file "none\.txt" cannot be read/,
  });
  await writeFile(join(dir, "s.txt"), "# only comments\n\n");
  await t.rejects(readSkuList(skus, sources), { code: "CONTRACT", message: /SKU list is empty/ });
  t.same(await readSkuList(skusOf({ from: "file", file: "s.txt", allowEmpty: true }), sources), []);
  await t.rejects(readSkuList(skusOf({ from: "sql", query: "select 1" }), sources), {
    code: "CONTRACT",
    message: /skus\.query needs the database/,
  });
});
