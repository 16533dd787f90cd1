// `supplier-sync changes` (docs/changes.md): a real CLI process against a real database,
// following its own cursor; a bad cursor or option is exit 2 naming it.
import t from "tap";
import { baseEnv, runCli } from "../helpers/cli.js";
import { createTestDatabase } from "../helpers/db.js";
import { query, until } from "../helpers/fixtures.js";

t.test("changes prints JSON lines and the cursor to follow; exit 2 for a bad cursor", async (t) => {
  const url = await createTestDatabase(t);
  await query(
    url,
    `insert into supplier_offer_observations (supplier, sku, run_id, price, currency, stock, content_hash, kind, txid)
     select case when i % 2 = 0 then 'etm' else 'iek' end, 'SKU-' || i, 1, 1.50 + i, 'EUR', i, 'h' || i, 'listed',
            pg_current_xact_id()
       from generate_series(1, 5) as i`,
  );
  const env = baseEnv({ DATABASE_URL: url });
  // The feed lags the oldest transaction running on the server: wait until the rows are in it.
  const first = await until(
    async () => {
      const r = await runCli(t, ["changes", "--json", "--limit", "3"], env);
      return r.stdout.trim().split("\n").filter(Boolean).length === 3 ? r : null;
    },
    30_000,
    "three changes",
  );
  t.equal(first.code, 0, first.stderr);
  const lines = first.stdout
    .trim()
    .split("\n")
    .map((l) => JSON.parse(l) as { cursor: string; sku: string; price: string; kind: string });
  t.same(
    lines.map((l) => [l.sku, l.price, l.kind]),
    [
      ["SKU-1", "2.50", "listed"],
      ["SKU-2", "3.50", "listed"],
      ["SKU-3", "4.50", "listed"],
    ],
  );
  const cursor = lines.at(-1)?.cursor as string;
  t.match(first.stderr, `cursor: ${cursor} (3 changes)`);

  const next = await runCli(t, ["changes", "--since", cursor, "--supplier", "etm"], env);
  t.equal(next.code, 0, next.stderr);
  const rows = next.stdout.trim().split("\n");
  t.match(rows[0], /^cursor\tkind\tsupplier\tsku/);
  t.same(
    rows.slice(1).map((r) => r.split("\t").slice(1, 5)),
    [["listed", "etm", "SKU-4", "5.50"]],
  );

  const end = await runCli(t, ["changes", "--since", "18446744073709551615:1"], env);
  t.equal(end.code, 0);
  t.match(end.stderr, "cursor: 18446744073709551615:1 (0 changes)", "nothing new: the cursor given");

  const bad = await runCli(t, ["changes", "--since", "12-3"], env);
  t.equal(bad.code, 2);
  t.match(bad.stderr, '--since "12-3" is not a cursor');
  const badLimit = await runCli(t, ["changes", "--limit", "0"], env);
  t.equal(badLimit.code, 2);
  t.match(badLimit.stderr, "--limit must be a whole number");
});
