import type { WalkContext } from "../../ingestion/ports.js";
import { readDotPath } from "../../platform/dot-path.js";
import { IngestionError, isIngestionError } from "../../platform/errors.js";
import { decodeJsonPage } from "../../platform/json-body.js";
import type { ConnectorDefinition, ExportDefinition } from "../schema/connector-schema.js";
import { matchesCondition } from "../transport/error-rules.js";
import type { Transport } from "../transport/transport.js";
import { requestBody, requestUrl } from "./request-template.js";

/**
 * An export job (docs/feeds.md, Export jobs): the supplier builds the catalog file on
 * request. The walk creates the job, polls it every `poll.intervalMs` until
 * `readyWhen` matches (or `failWhen`: `SUPPLIER`), and hands back the download
 * URL found at `download.urlPath` of the ready poll response, resolved
 * against that response's URL and checked against the allowed origins
 * (`CONTRACT` outside them). The file is then walked as a feed.
 *
 * The create and every poll are requests like any (rate limit, retries within
 * `timeouts.pageMs` each, credentials, `errors`). Polling is bounded by
 * `timeouts.runMs` from the creation (`DEADLINE`) and by the walk's signal
 * (the run's own deadline, lease loss, shutdown): the sleeps between polls end
 * at once when it aborts. The run heartbeat is the tick's, so a poll of
 * hours keeps the run alive.
 */

export interface ReadyExport {
  /** The file to download. */
  url: URL;
  /** The job's id, for logs. */
  job: string;
  /** Requests it took (create and polls, retries included). */
  attempts: number;
}

/** The JSON body of a create or poll response (any JSON content type; `records.path` is not involved). */
function jsonBody(body: Buffer, contentType: string | undefined, maxDepth: number, what: string): unknown {
  try {
    return decodeJsonPage(body, contentType, {
      maxDepth,
      maxRecords: Number.MAX_SAFE_INTEGER,
      recordsPath: "",
      objectIsRecord: true,
    }).body;
  } catch (err) {
    if (isIngestionError(err)) err.message = `export ${what}: ${err.message}`;
    throw err;
  }
}

function shown(value: unknown): string {
  const text = JSON.stringify(value) ?? String(value);
  return text.length > 200 ? `${text.slice(0, 200)}…` : text;
}

export async function runExportJob(
  transport: Transport,
  def: ConnectorDefinition,
  spec: ExportDefinition,
  ctx: WalkContext,
  signal: AbortSignal,
  headers: Record<string, string>,
): Promise<ReadyExport> {
  const { clock } = transport.options;
  const runMs = def.timeouts.runMs;
  let attempts = 0;
  const counted = <T>(promise: Promise<{ value: T; attempts: number }>): Promise<T> =>
    promise.then(
      (r) => {
        attempts += r.attempts;
        return r.value;
      },
      (err: unknown) => {
        if (isIngestionError(err)) {
          attempts += err.attempts ?? 0;
          err.attempts = attempts;
        }
        throw err;
      },
    );

  const createBody = requestBody(spec.create);
  const job = await counted(
    transport.fetchPage({
      url: requestUrl(def.baseUrl, spec.create),
      seq: 1,
      ctx,
      signal,
      headers: { ...headers, ...spec.create.headers },
      method: spec.create.method,
      ...(createBody ? { body: createBody } : {}),
      decode: (res) => {
        const body = jsonBody(res.body, res.contentType, def.maxJsonDepth, "create");
        const id = readDotPath(body, spec.create.jobIdPath);
        if ((typeof id !== "string" || id.trim() === "") && typeof id !== "number") {
          throw new IngestionError(
            "CONTRACT",
            `export create: no job id at ${spec.create.jobIdPath} (found ${id === undefined ? "nothing" : shown(id)})`,
          );
        }
        return String(id).trim();
      },
    }),
  );
  const startedAt = clock.now();
  ctx.log.info({ job }, "export job created");

  const values = { job };
  const pollUrl = requestUrl(def.baseUrl, spec.poll, values);
  const pollBody = requestBody(spec.poll, values);
  for (let polls = 1; ; polls++) {
    const verdict = await counted(
      transport.fetchPage({
        url: pollUrl,
        seq: 1,
        ctx,
        signal,
        headers: { ...headers, ...spec.poll.headers },
        method: spec.poll.method,
        ...(pollBody ? { body: pollBody } : {}),
        decode: (res) => {
          const body = jsonBody(res.body, res.contentType, def.maxJsonDepth, "poll");
          if (spec.poll.failWhen && matchesCondition(spec.poll.failWhen, res.status, body)) {
            const state = spec.poll.failWhen.path ? readDotPath(body, spec.poll.failWhen.path) : res.status;
            throw new IngestionError(
              "SUPPLIER",
              `export job ${job} failed (${spec.poll.failWhen.path ?? "status"} = ${shown(state)})`,
            );
          }
          if (!matchesCondition(spec.poll.readyWhen, res.status, body)) return null;
          const ref = readDotPath(body, spec.download.urlPath);
          if (typeof ref !== "string" || ref.trim() === "") {
            throw new IngestionError(
              "CONTRACT",
              `export job ${job} is ready but has no download URL at ${spec.download.urlPath} (found ${ref === undefined ? "nothing" : shown(ref)})`,
            );
          }
          return transport.http.origins.resolve(ref.trim(), res.url, "export download URL");
        },
      }),
    );
    if (verdict !== null) {
      ctx.log.info({ job, polls, waited_ms: clock.now() - startedAt }, "export job ready");
      return { url: verdict, job, attempts };
    }
    const left = startedAt + runMs - clock.now();
    if (left < spec.poll.intervalMs) {
      throw Object.assign(
        new IngestionError(
          "DEADLINE",
          `export job ${job} was not ready within timeouts.runMs (${runMs} ms, ${polls} polls)`,
        ),
        { attempts },
      );
    }
    ctx.log.debug({ job, polls }, "export job not ready yet");
    await clock.sleep(spec.poll.intervalMs, signal).catch((err: unknown) => {
      throw signal.aborted ? signal.reason : err;
    });
  }
}
