import t from "tap";
import { connectorDefinitionSchema } from "../schema/connector-schema.js";
import { addDays, dateIn, fillDates, isoDate } from "../schema/placeholders.js";
import { datedRequest, isDated } from "./dated-file.js";

/** `{date:…}` (docs/feeds.md, Dated files): patterns, time zones, and what the schema refuses. */

t.test("patterns are filled with the date, anything else kept", async (t) => {
  const d = { year: 2024, month: 3, day: 1 };
  t.equal(fillDates("/ekf_pricelist_{date:YYYY-MM-DD}.xlsx", d), "/ekf_pricelist_2024-03-01.xlsx");
  t.equal(fillDates("/p/{date:DD.MM.YYYY}/{date:YYYYMMDD}", d), "/p/01.03.2024/20240301");
  t.equal(fillDates("/{partition}/x", d), "/{partition}/x", "other placeholders untouched");
  const req = datedRequest(
    { path: "/f_{date:YYYY-MM-DD}.xlsx", query: { d: "{date:DD/MM/YYYY}", k: "v" } },
    d,
  );
  t.same(req, { path: "/f_2024-03-01.xlsx", query: { d: "01/03/2024", k: "v" } });
  t.ok(isDated({ path: "/x", query: { d: "{date:YYYY}" } }));
  t.notOk(isDated({ path: "/x", query: {} }));
});

t.test("today in a time zone, and days back across months and years", async (t) => {
  const instant = Date.UTC(2024, 0, 1, 22, 30); // 2024-01-01 22:30 UTC
  t.equal(isoDate(dateIn(instant)), "2024-01-01");
  t.equal(isoDate(dateIn(instant, "Europe/Moscow")), "2024-01-02", "01:30 the next day in Moscow");
  t.equal(isoDate(dateIn(instant, "America/New_York")), "2024-01-01");
  t.equal(isoDate(addDays({ year: 2024, month: 3, day: 1 }, -1)), "2024-02-29");
  t.equal(isoDate(addDays({ year: 2024, month: 1, day: 1 }, -7)), "2023-12-25");
});

t.test("the schema refuses bad patterns and {date:} outside path and query", async (t) => {
  const base = {
    baseUrl: "https://supplier.example",
    format: { type: "xlsx" },
    fields: { sku: "Артикул", price: "Цена, руб." },
  };
  const issues = (request: unknown) => {
    const r = connectorDefinitionSchema.safeParse({ ...base, request });
    return r.success ? [] : r.error.issues.map((i) => `${i.path.join(".")}: ${i.message}`);
  };
  t.same(issues({ path: "/p_{date:YYYY-MM-DD}.xlsx", dateFallbackDays: 7 }), []);
  t.same(issues({ path: "/p_{date:YYYY-MM-DDThh}.xlsx" }), [
    'request.path: date pattern "YYYY-MM-DDThh" must be made of YYYY, MM, DD and separators, e.g. {date:YYYY-MM-DD}',
  ]);
  t.same(issues({ path: "/p", method: "POST", form: { d: "{date:YYYY}" } }), [
    "request.form.d: placeholder {date:…} is only filled in a request's path and query",
  ]);
  t.same(issues({ path: "/p", dateFallbackDays: -1 }), ["request.dateFallbackDays: must be at least 0"]);
  // Header texts as paths only for workbooks: the same fields on a JSON API are refused.
  const json = connectorDefinitionSchema.safeParse({ ...base, format: undefined, request: { path: "/p" } });
  t.same(json.success ? [] : json.error.issues.map((i) => `${i.path.join(".")}: ${i.message}`), [
    "fields.price: must be a dot path like data.items (no empty segments)",
  ]);
});
