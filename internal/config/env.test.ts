import t from "tap";
import { ConfigError } from "../platform/errors.js";
import { loadConfig, parseHttpAddr, redactDatabaseUrl } from "./env.js";

const CWD = "/srv/supplier-sync";
const BASE = { SUPPLIER_SYNC_SUPPLIERS: "etm:6h" };

function load(extra: Record<string, string | undefined>) {
  return loadConfig({ ...BASE, ...extra }, CWD);
}

t.test("defaults", async (t) => {
  const config = loadConfig({ SUPPLIER_SYNC_SUPPLIERS: "etm:6h:true,iek:12h:false" }, CWD);
  t.same(config.suppliers, [
    { name: "etm", intervalMs: 21_600_000, enabled: true },
    { name: "iek", intervalMs: 43_200_000, enabled: false },
  ]);
  t.equal(config.databaseUrl, undefined);
  t.equal(config.connectorsDir, "/srv/supplier-sync/config/suppliers");
  t.same(config.httpAddr, { host: "127.0.0.1", port: 9464 });
  t.equal(config.maxConcurrentTicks, 4);
  t.equal(config.dbPoolMax, 8);
  t.equal(config.shutdownTimeoutMs, 25_000);
  t.equal(config.retryBackoffMs, 60_000);
  t.equal(config.logLevel, "info");
  t.equal(config.lease, "advisory");
  t.equal(config.leaseTtlMs, 60_000);
  t.equal(config.leaseDeadPeerMs, 30_000);
  t.equal(config.production, false);
});

t.test("every variable set", async (t) => {
  const config = load({
    DATABASE_URL: "postgresql://app:pw@db:5432/catalog",
    SUPPLIER_SYNC_CONNECTORS_DIR: "/etc/supplier-sync/connectors",
    SUPPLIER_SYNC_HTTP_ADDR: "[::1]:0",
    SUPPLIER_SYNC_MAX_CONCURRENT_TICKS: "1",
    SUPPLIER_SYNC_DB_POOL_MAX: "2",
    SUPPLIER_SYNC_SHUTDOWN_TIMEOUT: "1m30s",
    SUPPLIER_SYNC_RETRY_BACKOFF: "30s",
    SUPPLIER_SYNC_LOG_LEVEL: "DEBUG",
    SUPPLIER_SYNC_LEASE: "Table",
    SUPPLIER_SYNC_LEASE_TTL: "1m30s",
    SUPPLIER_SYNC_LEASE_DEAD_PEER: "45s",
    NODE_ENV: "production",
  });
  t.equal(config.databaseUrl, "postgresql://app:pw@db:5432/catalog");
  t.equal(config.connectorsDir, "/etc/supplier-sync/connectors");
  t.same(config.httpAddr, { host: "::1", port: 0 });
  t.equal(config.maxConcurrentTicks, 1);
  t.equal(config.dbPoolMax, 2);
  t.equal(config.shutdownTimeoutMs, 90_000);
  t.equal(config.retryBackoffMs, 30_000);
  t.equal(config.logLevel, "debug");
  t.equal(config.lease, "table");
  t.equal(config.leaseTtlMs, 90_000);
  t.equal(config.leaseDeadPeerMs, 45_000);
  t.equal(config.production, true);
});

t.test("relative connectors dir resolves against cwd; empty optional values mean the default", async (t) => {
  t.equal(load({ SUPPLIER_SYNC_CONNECTORS_DIR: "conf/x" }).connectorsDir, "/srv/supplier-sync/conf/x");
  const config = load({ SUPPLIER_SYNC_HTTP_ADDR: "", SUPPLIER_SYNC_DB_POOL_MAX: " ", DATABASE_URL: "" });
  t.same(config.httpAddr, { host: "127.0.0.1", port: 9464 });
  t.equal(config.dbPoolMax, 8);
  t.equal(config.databaseUrl, undefined);
});

t.test("readSecretEnv reads a snapshot of the env argument", async (t) => {
  const env: Record<string, string | undefined> = { ...BASE, ETM_TOKEN: "s3cret" };
  const config = loadConfig(env, CWD);
  env["ETM_TOKEN"] = "changed";
  env["LATE"] = "x";
  t.equal(config.readSecretEnv("ETM_TOKEN"), "s3cret");
  t.equal(config.readSecretEnv("LATE"), undefined);
});

/** Each rejection: the variable, the bad value, what the message must (and must not) contain. */
const bad: Array<[why: string, env: Record<string, string | undefined>, mustName: string[], never?: string]> =
  [
    ["suppliers unset", { SUPPLIER_SYNC_SUPPLIERS: undefined }, ["SUPPLIER_SYNC_SUPPLIERS", "required"]],
    ["unknown lease", { SUPPLIER_SYNC_LEASE: "foo" }, ["SUPPLIER_SYNC_LEASE", '"foo"', "advisory", "table"]],
    ["lease TTL not a duration", { SUPPLIER_SYNC_LEASE_TTL: "soon" }, ["SUPPLIER_SYNC_LEASE_TTL", '"soon"']],
    ["lease TTL under 1s", { SUPPLIER_SYNC_LEASE_TTL: "0s" }, ["SUPPLIER_SYNC_LEASE_TTL", "1s"]],
    [
      "dead-peer bound not a duration",
      { SUPPLIER_SYNC_LEASE_DEAD_PEER: "soon" },
      ["SUPPLIER_SYNC_LEASE_DEAD_PEER", '"soon"', "duration"],
    ],
    [
      "dead-peer bound under 3s",
      { SUPPLIER_SYNC_LEASE_DEAD_PEER: "2s" },
      ["SUPPLIER_SYNC_LEASE_DEAD_PEER", '"2s"', "3s", "1h"],
    ],
    [
      "dead-peer bound over 1h",
      { SUPPLIER_SYNC_LEASE_DEAD_PEER: "1h1s" },
      ["SUPPLIER_SYNC_LEASE_DEAD_PEER", '"1h1s"', "3s", "1h"],
    ],
    ["suppliers malformed", { SUPPLIER_SYNC_SUPPLIERS: "etm" }, ["SUPPLIER_SYNC_SUPPLIERS", '"etm"']],
    [
      "retired tick interval",
      { SUPPLIER_SYNC_TICK_INTERVAL: "6h" },
      ["SUPPLIER_SYNC_TICK_INTERVAL", "SUPPLIER_SYNC_SUPPLIERS"],
    ],
    [
      "retired tick interval, empty",
      { SUPPLIER_SYNC_TICK_INTERVAL: "" },
      ["SUPPLIER_SYNC_TICK_INTERVAL", "retired"],
    ],
    [
      "retired enabled flag",
      { SUPPLIER_SYNC_ENABLED: "true" },
      ["SUPPLIER_SYNC_ENABLED", "SUPPLIER_SYNC_SUPPLIERS"],
    ],
    ["retired enabled flag, empty", { SUPPLIER_SYNC_ENABLED: "" }, ["SUPPLIER_SYNC_ENABLED"]],
    ["production without database", { NODE_ENV: "production" }, ["DATABASE_URL", "production"]],
    ["production with empty database", { NODE_ENV: "production", DATABASE_URL: "" }, ["DATABASE_URL"]],
    [
      "database URL of another scheme",
      { DATABASE_URL: "mysql://root:hunter22@db/x" },
      ["DATABASE_URL", "mysql://***@db/x", "postgres://"],
      "hunter22",
    ],
    ["database URL not a URL", { DATABASE_URL: "db.internal:5432" }, ["DATABASE_URL", "db.internal"]],
    [
      "database URL with a broken password is never printed",
      { DATABASE_URL: "not a url user:hunter 22@db" },
      ["DATABASE_URL", "***@db"],
      "hunter",
    ],
    [
      "http addr without port",
      { SUPPLIER_SYNC_HTTP_ADDR: "localhost" },
      ["SUPPLIER_SYNC_HTTP_ADDR", '"localhost"'],
    ],
    [
      "http addr port too big",
      { SUPPLIER_SYNC_HTTP_ADDR: "127.0.0.1:65536" },
      ["SUPPLIER_SYNC_HTTP_ADDR", '"65536"'],
    ],
    [
      "http addr port not a number",
      { SUPPLIER_SYNC_HTTP_ADDR: "127.0.0.1:http" },
      ["SUPPLIER_SYNC_HTTP_ADDR", '"http"'],
    ],
    [
      "http addr without host",
      { SUPPLIER_SYNC_HTTP_ADDR: ":9464" },
      ["SUPPLIER_SYNC_HTTP_ADDR", '":9464"', "0.0.0.0"],
    ],
    [
      "http addr IPv6 unbracketed",
      { SUPPLIER_SYNC_HTTP_ADDR: "::1:9464" },
      ["SUPPLIER_SYNC_HTTP_ADDR", "[::1]:9464"],
    ],
    ["http addr bad IPv6", { SUPPLIER_SYNC_HTTP_ADDR: "[nope]:9464" }, ["SUPPLIER_SYNC_HTTP_ADDR", '"nope"']],
    [
      "http addr negative port",
      { SUPPLIER_SYNC_HTTP_ADDR: "127.0.0.1:-1" },
      ["SUPPLIER_SYNC_HTTP_ADDR", '"-1"'],
    ],
    [
      "max ticks zero",
      { SUPPLIER_SYNC_MAX_CONCURRENT_TICKS: "0" },
      ["SUPPLIER_SYNC_MAX_CONCURRENT_TICKS", '"0"'],
    ],
    [
      "max ticks fractional",
      { SUPPLIER_SYNC_MAX_CONCURRENT_TICKS: "2.5" },
      ["SUPPLIER_SYNC_MAX_CONCURRENT_TICKS", '"2.5"'],
    ],
    [
      "max ticks word",
      { SUPPLIER_SYNC_MAX_CONCURRENT_TICKS: "four" },
      ["SUPPLIER_SYNC_MAX_CONCURRENT_TICKS", '"four"'],
    ],
    ["pool max one", { SUPPLIER_SYNC_DB_POOL_MAX: "1" }, ["SUPPLIER_SYNC_DB_POOL_MAX", '"1"', "from 2"]],
    ["pool max huge", { SUPPLIER_SYNC_DB_POOL_MAX: "99999999999999999999" }, ["SUPPLIER_SYNC_DB_POOL_MAX"]],
    [
      "shutdown timeout unparseable",
      { SUPPLIER_SYNC_SHUTDOWN_TIMEOUT: "25" },
      ["SUPPLIER_SYNC_SHUTDOWN_TIMEOUT", '"25"'],
    ],
    [
      "shutdown timeout zero",
      { SUPPLIER_SYNC_SHUTDOWN_TIMEOUT: "0s" },
      ["SUPPLIER_SYNC_SHUTDOWN_TIMEOUT", '"0s"'],
    ],
    [
      "shutdown timeout past timer range",
      { SUPPLIER_SYNC_SHUTDOWN_TIMEOUT: "30d" },
      ["SUPPLIER_SYNC_SHUTDOWN_TIMEOUT", '"30d"'],
    ],
    [
      "retry backoff negative",
      { SUPPLIER_SYNC_RETRY_BACKOFF: "-1m" },
      ["SUPPLIER_SYNC_RETRY_BACKOFF", '"-1m"'],
    ],
    [
      "retry backoff milliseconds",
      { SUPPLIER_SYNC_RETRY_BACKOFF: "500ms" },
      ["SUPPLIER_SYNC_RETRY_BACKOFF", '"500ms"'],
    ],
    [
      "log level unknown",
      { SUPPLIER_SYNC_LOG_LEVEL: "verbose" },
      ["SUPPLIER_SYNC_LOG_LEVEL", '"verbose"', "trace"],
    ],
  ];

t.test("each rejection is a ConfigError naming its variable and value", async (t) => {
  for (const [why, extra, mustName, never] of bad) {
    let caught: unknown;
    try {
      load(extra);
    } catch (err) {
      caught = err;
    }
    t.type(caught, ConfigError, `${why}: ConfigError`);
    const message = (caught as Error | undefined)?.message ?? "";
    for (const token of mustName)
      t.ok(message.includes(token), `${why}: ${JSON.stringify(token)} in ${message}`);
    if (never !== undefined) t.notOk(message.includes(never), `${why}: no ${never} in ${message}`);
  }
});

t.test("accepted addresses", async (t) => {
  t.same(parseHttpAddr("0.0.0.0:9464"), { host: "0.0.0.0", port: 9464 });
  t.same(parseHttpAddr("localhost:65535"), { host: "localhost", port: 65_535 });
  t.same(parseHttpAddr("[::]:80"), { host: "::", port: 80 });
  t.same(parseHttpAddr("metrics.internal:0"), { host: "metrics.internal", port: 0 });
});

t.test("database URLs are shown without credentials", async (t) => {
  t.equal(redactDatabaseUrl("postgres://app:s3cr3t@db:5432/x"), "postgres://***@db:5432/x");
  t.equal(
    redactDatabaseUrl("postgres://db/x?password=s3cr3t&sslmode=require"),
    "postgres://db/x?password=***&sslmode=require",
  );
  t.equal(redactDatabaseUrl("postgres://db/x"), "postgres://db/x");
  t.notMatch(redactDatabaseUrl("junk app:s3 cr3t@db"), /s3/);
});

t.test("SUPPLIER_SYNC_TEST_CLOCK_SKEW: a signed duration, test-only", async (t) => {
  t.equal(load({}).testClockSkewMs, 0, "unset: no skew");
  t.equal(load({ SUPPLIER_SYNC_TEST_CLOCK_SKEW: "90s" }).testClockSkewMs, 90_000);
  t.equal(load({ SUPPLIER_SYNC_TEST_CLOCK_SKEW: "-1m30s" }).testClockSkewMs, -90_000);
  for (const bad of ["soon", "-", "90", "2d"]) {
    t.throws(() => load({ SUPPLIER_SYNC_TEST_CLOCK_SKEW: bad }), /SUPPLIER_SYNC_TEST_CLOCK_SKEW/, bad);
  }
  t.throws(
    () =>
      load({
        SUPPLIER_SYNC_TEST_CLOCK_SKEW: "90s",
        NODE_ENV: "production",
        DATABASE_URL: "postgres://db/x",
      }),
    { message: /for tests only/ },
    "refused in production",
  );
});
