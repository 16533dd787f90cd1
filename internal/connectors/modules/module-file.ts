import { realpathSync, statSync } from "node:fs";
import { isAbsolute, relative, resolve, sep } from "node:path";
import { pathToFileURL } from "node:url";
import { ConfigError, errorMessage } from "../../platform/errors.js";
import { MODULE_FILE } from "../schema/connector-schema.js";
import type { ConnectorModule } from "./registry.js";

/**
 * Connector modules loaded from the connectors folder (docs/connector-modules.md):
 * `"module": "./<file>.mjs"` in a connector file names an ES module whose default
 * export has the registry's signature, `(transport, settings) => Connector`.
 *
 * Invariant: only a file whose resolved real path (every symlink followed, the
 * folder's own path resolved too) lies inside the connectors folder is ever
 * imported. Anything else is a configuration error naming the `module` key, raised
 * before any code of the file runs.
 */

export function isModuleFile(module: string): boolean {
  return module.startsWith("./");
}

/**
 * The real path of `./<file>.mjs` inside `connectorsDir`.
 * @throws ConfigError (message `module: …`) when it is missing, not a file, or resolves outside the folder.
 */
export function resolveModuleFile(connectorsDir: string, module: string): string {
  const shown = JSON.stringify(module);
  if (!MODULE_FILE.test(module)) {
    throw new ConfigError(`module: ${shown} must be "./<file>.mjs", a path inside the connectors folder`);
  }
  const outside = (to: string) =>
    new ConfigError(`module: ${shown} resolves outside the connectors folder (to ${to})`);
  let folder: string;
  let file: string;
  try {
    folder = realpathSync(connectorsDir);
    // `..` segments first, so an escape is named as one whether or not its target exists.
    const lexical = resolve(folder, module);
    if (!isInside(folder, lexical)) throw outside(lexical);
    file = realpathSync(lexical);
  } catch (err) {
    if (err instanceof ConfigError) throw err;
    const code = (err as { code?: unknown }).code;
    if (code === "ENOENT" || code === "ENOTDIR") {
      throw new ConfigError(`module: ${shown} does not exist in the connectors folder`);
    }
    throw new ConfigError(`module: ${shown} cannot be resolved: ${errorMessage(err)}`, { cause: err });
  }
  if (!isInside(folder, file)) throw outside(file);
  if (!file.endsWith(".mjs")) {
    throw new ConfigError(`module: ${shown} resolves to ${file}, which is not an .mjs file`);
  }
  if (!statSync(file).isFile()) throw new ConfigError(`module: ${shown} is not a file`);
  return file;
}

/** True when `path` lies strictly inside `folder` (both absolute, already resolved). */
function isInside(folder: string, path: string): boolean {
  const rel = relative(folder, path);
  return rel !== "" && rel !== ".." && !rel.startsWith(`..${sep}`) && !isAbsolute(rel);
}

/**
 * Imports a resolved module file and returns its default export.
 * @throws ConfigError (message `module: …`) when importing it throws, or its default export is not a function.
 */
export async function importModuleFile(file: string, module: string): Promise<ConnectorModule> {
  const shown = JSON.stringify(module);
  let loaded: { default?: unknown };
  try {
    loaded = (await import(pathToFileURL(file).href)) as { default?: unknown };
  } catch (err) {
    throw new ConfigError(`module: ${shown} failed to load: ${errorMessage(err)}`, { cause: err });
  }
  if (typeof loaded.default !== "function") {
    throw new ConfigError(
      `module: ${shown} has no default export function ` +
        "(it must `export default function (transport, settings) { return { walk, close } }`)",
    );
  }
  return loaded.default as ConnectorModule;
}

/** {@link resolveModuleFile} then {@link importModuleFile}. */
export async function loadModuleFile(connectorsDir: string, module: string): Promise<ConnectorModule> {
  return importModuleFile(resolveModuleFile(connectorsDir, module), module);
}
