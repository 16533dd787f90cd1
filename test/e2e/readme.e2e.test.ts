// README.md's command blocks marked `<!-- tested: … -->` work as written (issue 34): each is
// run by bash from the repository root on the build `npm test` made, and must exit 0.
// Blocks that need things a test cannot have (docker, the demo's fixed port) are not marked.
import { spawnSync } from "node:child_process";
import { readFileSync } from "node:fs";
import { type AddressInfo, createServer } from "node:net";
import { fileURLToPath } from "node:url";
import t from "tap";

const root = fileURLToPath(new URL("../..", import.meta.url));
const readme = readFileSync(new URL("README.md", `file://${root}/`), "utf8");
const blocks = [...readme.matchAll(/<!-- tested[^>]*-->\n```sh\n([\s\S]*?)```/g)].map((m) => m[1] ?? "");

async function freePort(): Promise<number> {
  const server = createServer();
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  const { port } = server.address() as AddressInfo;
  await new Promise((resolve) => server.close(resolve));
  return port;
}

t.ok(blocks.length >= 1, `${blocks.length} tested blocks in README.md`);

for (const [i, block] of blocks.entries()) {
  t.test(`README block ${i + 1}: ${block.split("\n")[0]}`, async (t) => {
    const env = { ...process.env };
    // The block sets what it needs; none of the suite's settings leak into it.
    for (const key of Object.keys(env)) {
      if (key.startsWith("SUPPLIER_SYNC_") || key === "DATABASE_URL") delete env[key];
    }
    // A free port for blocks that start a simulator (`SIM_PORT`, default 9466): the suite's
    // runs side by side (.ci/run) must not meet on one port.
    env.SIM_PORT = String(await freePort());
    const r = spawnSync("bash", ["-euo", "pipefail", "-c", block], {
      cwd: root,
      env,
      encoding: "utf8",
      timeout: 120_000,
    });
    t.equal(r.status, 0, r.status === 0 ? "exit 0" : `${r.stdout}\n${r.stderr}`.slice(-4_000));
    if (block.includes("preview etm")) {
      t.match(r.stdout, /^preview of etm$/m);
      t.match(
        r.stdout,
        new RegExp(`POST http://127\\.0\\.0\\.1:${env.SIM_PORT}/etm/api/v1/user/login.* -> 200`),
      );
      t.match(r.stdout, /\n {2}20 offers, 0 rejects\n/);
      t.match(r.stdout, /the walk is complete/);
    }
  });
}
