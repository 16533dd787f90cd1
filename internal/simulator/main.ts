/**
 * Runs the supplier simulator on its own:
 *   node dist/internal/simulator/main.js [--port 9465] [--host 127.0.0.1] [--config file.json]
 * Prints one JSON line when listening; exits 0 on SIGTERM/SIGINT once closed
 * (a second signal exits at once), 2 on bad arguments or config.
 */
import { DEMO_SUPPLIERS, loadConfig, type MainArgs, parseArgs, USAGE } from "./cli.js";
import { startSimulator } from "./server.js";
import type { SimulatorSupplierOptions } from "./types.js";

async function main(): Promise<void> {
  let args: MainArgs;
  let suppliers: Record<string, SimulatorSupplierOptions>;
  try {
    args = parseArgs(process.argv.slice(2));
    if (args.help) {
      process.stdout.write(`${USAGE}\n`);
      process.exit(0);
    }
    suppliers = args.config ? loadConfig(args.config) : DEMO_SUPPLIERS;
  } catch (err) {
    process.stderr.write(`${err instanceof Error ? err.message : String(err)}\n`);
    process.exit(2);
  }
  const sim = await startSimulator({ port: args.port, host: args.host, suppliers });
  process.stdout.write(
    `${JSON.stringify({ msg: "simulator listening", url: sim.url, suppliers: Object.keys(suppliers) })}\n`,
  );
  let stopping = false;
  const stop = (signal: string) => {
    if (stopping) process.exit(1);
    stopping = true;
    sim.close().then(() => {
      process.stdout.write(`${JSON.stringify({ msg: "simulator stopped", signal })}\n`);
      process.exit(0);
    });
  };
  process.on("SIGTERM", () => stop("SIGTERM"));
  process.on("SIGINT", () => stop("SIGINT"));
}

main().catch((err: unknown) => {
  process.stderr.write(`simulator: ${err instanceof Error ? err.message : String(err)}\n`);
  process.exit(1);
});
