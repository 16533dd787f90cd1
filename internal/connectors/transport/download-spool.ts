import { createReadStream, createWriteStream } from "node:fs";
import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import type { Readable } from "node:stream";
import { pipeline } from "node:stream/promises";
import { errorMessage, IngestionError } from "../../platform/errors.js";

/**
 * A file walk that enriches its steps (docs/feeds.md, Export jobs) reads the file as
 * slowly as the enrichment goes: ETM prices 50 codes a second, so a step of 500
 * products holds the download still for ten seconds. Servers close a keep-alive
 * connection whose response they finished writing after a few idle seconds (Apache
 * and Node: 5 s), and undici 7 fails a body whose parser was paused by back-pressure
 * when that close arrives ("other side closed", nodejs/undici#5360), even when every
 * byte was received. So such a walk first spools the body to a private temp file, at
 * the network's pace, and reads the file from disk.
 *
 * Invariants: at most `maxBytes` are written (`CONTRACT` beyond); the temp directory
 * is removed by `remove()`, and on any failure here before returning.
 */

export interface SpooledBody {
  body: Readable;
  bytes: number;
  /** Removes the temp file; safe to call more than once. */
  remove(): Promise<void>;
}

export async function spoolBody(
  source: Readable,
  options: { maxBytes: number; signal: AbortSignal; dir?: string | undefined },
): Promise<SpooledBody> {
  const parent = options.dir ?? tmpdir();
  const dir = await mkdtemp(join(parent, "supplier-sync-download-")).catch((err: unknown) => {
    throw new IngestionError("INTERNAL", `cannot spool the download to ${parent}: ${errorMessage(err)}`, {
      cause: err,
    });
  });
  let removed: Promise<void> | undefined;
  const remove = () => {
    removed ??= rm(dir, { recursive: true, force: true });
    return removed;
  };
  const path = join(dir, "body");
  let bytes = 0;
  let bodyFailed = false;
  let diskFailed = false;
  const out = createWriteStream(path, { mode: 0o600 });
  out.once("error", () => {
    diskFailed = true;
  });
  try {
    await pipeline(
      source,
      async function* bounded(chunks: AsyncIterable<Buffer>) {
        try {
          for await (const chunk of chunks) {
            bytes += chunk.length;
            if (bytes > options.maxBytes) {
              throw new IngestionError(
                "CONTRACT",
                `download is larger than maxResponseBytes (${options.maxBytes} bytes)`,
              );
            }
            yield chunk;
          }
        } catch (err) {
          if (!(err instanceof IngestionError)) bodyFailed = true;
          throw err;
        }
      },
      out,
      { signal: options.signal },
    );
  } catch (err) {
    await remove();
    if (err instanceof IngestionError) throw err;
    if (options.signal.aborted) throw options.signal.reason;
    if (bodyFailed && !diskFailed) {
      throw new IngestionError("NETWORK", `download broke off after ${bytes} bytes: ${errorMessage(err)}`, {
        cause: err,
        retryable: true,
      });
    }
    throw new IngestionError("INTERNAL", `cannot spool the download to ${parent}: ${errorMessage(err)}`, {
      cause: err,
    });
  }
  return { body: createReadStream(path), bytes, remove };
}
