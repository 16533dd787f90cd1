// Placeholders where requests are built (docs/connectors.md, Requests): percent-encoded in a path and in
// query values with the {skus} separator kept literal, as is in body and form strings.
import t from "tap";
import { batchValues, inBatches, requestBody, requestUrl } from "./request-template.js";

const request = { path: "/goods/{skus}/price", query: { type: "cli", group: "{partition}" } };

t.test("path and query values are percent-encoded, the separator stays literal", async (t) => {
  const url = requestUrl(
    "https://api.example/v1/",
    request,
    { ...batchValues(["A/1", "B 2", "C;3"], ","), partition: "a&b=c" },
    ",",
  );
  t.equal(url.pathname, "/v1/goods/A%2F1,B%202,C%3B3/price");
  t.equal(url.search, "?type=cli&group=a%26b%3Dc");
  t.equal(url.searchParams.get("group"), "a&b=c", "the value reads back exactly");
  const skus = requestUrl(
    "https://api.example",
    { path: "/s", query: { ref: "{skus}" } },
    batchValues(["x", "y"], ";"),
    ";",
  );
  t.equal(skus.search, "?ref=x;y", "a query value keeps the separator literal too");
  const paged = requestUrl(
    "https://api.example",
    { path: "/p", query: { g: "{partition}" } },
    { partition: "G1" },
    "",
    {
      page: "1",
    },
  );
  t.equal(paged.search, "?page=1&g=G1", "page parameters and templated values together");
});

t.test("body and form strings take the values as they are", async (t) => {
  const values = { ...batchValues(["A/1", "B 2"], ","), partition: "x&y" };
  t.same(requestBody({ body: { ids: "{skus}", nested: ["{partition}", 3] } }, values), {
    contentType: "application/json",
    data: JSON.stringify({ ids: "A/1,B 2", nested: ["x&y", 3] }),
  });
  const form = requestBody({ form: { refs: "{skus}", group: "{partition}" } }, values);
  t.equal(form?.contentType, "application/x-www-form-urlencoded");
  t.same(Object.fromEntries(new URLSearchParams(form?.data)), { refs: "A/1,B 2", group: "x&y" });
  t.equal(requestBody({}, values), undefined);
});

t.test("batches and their values", async (t) => {
  t.same(inBatches([1, 2, 3, 4, 5], 2), [[1, 2], [3, 4], [5]]);
  t.same(batchValues(["a"], ","), { skus: "a", sku_list: '["a"]', sku: "a" }, "{sku} for a batch of one");
  t.same(batchValues(["a", "b"], "|"), { skus: "a|b", sku_list: '["a","b"]' });
});

t.test(
  "{sku_list}: the batch as a JSON array in a POST body, strings whatever the codes look like",
  async (t) => {
    const body = requestBody(
      { body: { items: "{sku_list}", joined: "{skus}" } },
      batchValues(["563726", 'A"1', "B 2"], ","),
    );
    t.equal(body?.contentType, "application/json");
    t.same(JSON.parse(body?.data ?? "null"), { items: ["563726", 'A"1', "B 2"], joined: '563726,A"1,B 2' });
  },
);
