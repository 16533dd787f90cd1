// check-config's reasons for a broken connector file (issue 34): bad JSON as line:column with
// the offending line, a required key that is absent as "missing".
import t from "tap";
import { formatCheckConfig } from "../../app/check-config.js";
import { loadConfig } from "../../config/env.js";
import { SecretRegistry } from "../../platform/redact.js";
import { loadConnectors } from "../load.js";
import { describeJsonError, locate } from "./json-text.js";

const BROKEN = `{
  "baseUrl": "https://api.example",
  "fields": {
    "sku": "id",
    "price": ,
  }
}
`;

t.test("locate: 1-based line and column of an offset, and the line", async (t) => {
  t.same(locate("ab\ncd\r\nef", 0), { line: 1, column: 1, lineText: "ab" });
  t.same(locate("ab\ncd\r\nef", 4), { line: 2, column: 2, lineText: "cd" });
  t.same(locate("ab\ncd\r\nef", 7), { line: 3, column: 1, lineText: "ef" });
});

t.test("describeJsonError names line, column, the error and the line", async (t) => {
  let message = "";
  try {
    JSON.parse(BROKEN);
  } catch (err) {
    message = (err as Error).message;
  }
  t.equal(
    describeJsonError(BROKEN, message),
    'invalid JSON at line 5, column 14 (ValueExpected): `    "price": ,`',
  );
  t.match(describeJsonError('{"a": 1,}', "x"), /^invalid JSON at line 1, column 9 \(\w+\): `\{"a": 1,\}`$/);
  t.match(describeJsonError('{"a": 1} // note', "x"), /^invalid JSON at line 1, column 10 /, "no comments");
  t.equal(
    describeJsonError("", "Unexpected end of JSON input"),
    "invalid JSON at line 1, column 1 (ValueExpected): ``",
  );
  const long = `{"a": ${"1".repeat(300)}x}`;
  t.ok(describeJsonError(long, "x").endsWith("…`"), "a long line is cut");
});

t.test("check-config: line:column for bad JSON, 'missing' for an absent required key", async (t) => {
  const dir = t.testdir({
    "broken.json": BROKEN,
    "nobase.json": JSON.stringify({ fields: { sku: "id", price: "p" } }),
    "notype.json": JSON.stringify({
      baseUrl: "https://api.example",
      auth: {},
      fields: { sku: "id", price: "p" },
    }),
    "norecpath.json": JSON.stringify({
      baseUrl: "https://api.example",
      records: {},
      fields: { sku: "id", price: "p" },
    }),
    "nosku.json": JSON.stringify({ baseUrl: "https://api.example", fields: { price: "p" } }),
    "nullsku.json": JSON.stringify({ baseUrl: "https://api.example", fields: { sku: null, price: "p" } }),
  });
  const config = loadConfig(
    {
      SUPPLIER_SYNC_SUPPLIERS: "broken:1h,nobase:1h,notype:1h,norecpath:1h,nosku:1h,nullsku:1h",
      SUPPLIER_SYNC_CONNECTORS_DIR: dir,
    },
    "/",
  );
  const secrets = new SecretRegistry();
  const statuses = await loadConnectors(
    config,
    config.suppliers.map((s) => s.name),
    secrets,
  );
  const { text, ok } = formatCheckConfig(config, statuses, secrets);
  t.equal(ok, false);
  const line = (name: string) => text.split("\n").find((l) => l.trimStart().startsWith(`${name} `)) ?? "";
  t.match(
    line("broken"),
    /broken\.json\): invalid JSON at line 5, column 14 \(ValueExpected\): ` {4}"price": ,`$/,
  );
  t.match(line("nobase"), /nobase\.json\): baseUrl: missing: must be an http\(s\) URL$/);
  t.match(line("notype"), /notype\.json\): auth\.type: missing: Invalid discriminator value/);
  t.match(line("norecpath"), /norecpath\.json\): records\.path: missing \(required: string\)$/);
  t.match(line("nosku"), /nosku\.json\): fields\.sku: missing: must be a dot path/);
  t.notMatch(line("nullsku").split(".json): ")[1], /missing/, "a key that is there but null is not missing");
  t.match(line("nullsku"), /fields\.sku: /);
});
