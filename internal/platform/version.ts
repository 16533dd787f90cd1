import { readFileSync } from "node:fs";

/**
 * The version of this package from its `package.json`, found from this module in
 * either layout (sources run by tsx/tap, or `dist/` after the build). `unknown`
 * when neither is there.
 */
export function readVersion(): string {
  for (const rel of ["../../package.json", "../../../package.json"]) {
    try {
      const pkg = JSON.parse(readFileSync(new URL(rel, import.meta.url), "utf8")) as {
        name?: string;
        version?: string;
      };
      if (pkg.name === "supplier-sync" && pkg.version) return pkg.version;
    } catch {
      // try the next location (source vs dist layout)
    }
  }
  return "unknown";
}
