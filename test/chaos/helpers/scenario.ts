/**
 * One chaos scenario = one tap subtest that also appends a result line (scenario,
 * outcome, invariants checked, duration) to the runner's JSONL file, from which
 * `test/chaos/run.mjs` prints its table.
 */
import { appendFileSync } from "node:fs";
import { relative } from "node:path";
import { fileURLToPath } from "node:url";
import t, { type Test } from "tap";
import { testLease } from "../../helpers/cli.js";

const ROOT = fileURLToPath(new URL("../../../", import.meta.url));

export interface ScenarioOptions {
  /** Hard bound of the scenario; tap fails it when exceeded. */
  timeoutMs: number;
  /**
   * A product bug this scenario exposes, described in the report: the scenario still
   * runs and asserts, but a failure shows as `known failure` instead of failing the suite.
   */
  knownFailure?: string;
}

/** Result line consumed by the runner. */
interface ScenarioResult {
  file: string;
  /** The lease the scenario's processes used (the runner runs the suite once per lease). */
  lease: "advisory" | "table";
  scenario: string;
  outcome: "pass" | "FAIL" | "known failure";
  invariants: string[];
  durationMs: number;
  note?: string;
}

function record(result: ScenarioResult): void {
  const path = process.env.CHAOS_RESULTS;
  // Run outside the runner (plain `npx tap`): tap's own output is the report.
  if (path) appendFileSync(path, `${JSON.stringify(result)}\n`);
}

/** What a scenario returns: the invariants it checked, and optionally a line of figures. */
export type ScenarioReport = string[] | { invariants: string[]; note?: string };

/**
 * Declares a scenario. `fn` returns the names of the invariants it checked (usually
 * what {@link assertInvariants} returned), shown in the runner's table, and may add a
 * note (measured figures) printed under its row.
 */
export function scenario(
  name: string,
  options: ScenarioOptions,
  fn: (t: Test) => Promise<ScenarioReport>,
): void {
  const file = relative(ROOT, fileURLToPath(new URL(process.argv[1] ?? "", "file://")));
  const testOptions = {
    timeout: options.timeoutMs,
    ...(options.knownFailure ? { todo: options.knownFailure } : {}),
  };
  t.test(name, testOptions, async (st) => {
    const started = Date.now();
    let invariants: string[] = [];
    let figures: string | undefined;
    try {
      const report = await fn(st);
      if (Array.isArray(report)) invariants = report;
      else {
        invariants = report.invariants;
        figures = report.note;
      }
    } catch (err) {
      st.error(err, "scenario threw");
    }
    const ok = st.passing();
    const { lease } = testLease();
    record({
      file: file.startsWith("..") ? name : file,
      lease,
      scenario: lease === "table" ? `${name} [table lease]` : name,
      outcome: ok ? "pass" : options.knownFailure ? "known failure" : "FAIL",
      invariants,
      durationMs: Date.now() - started,
      ...(options.knownFailure
        ? { note: ok ? `expected to fail (${options.knownFailure}) but passed` : options.knownFailure }
        : figures
          ? { note: figures }
          : {}),
    });
  });
}
