import type { Page, WalkContext } from "../../ingestion/ports.js";
import { IngestionError, isIngestionError } from "../../platform/errors.js";
import type { RequestDefinition } from "../schema/connector-schema.js";
import {
  addDays,
  type CalendarDate,
  dateIn,
  datePatternsIn,
  fillDates,
  isoDate,
} from "../schema/placeholders.js";

/**
 * Dated files (docs/feeds.md, Dated files): `{date:…}` in the request's path and
 * query is today's date in the supplier's time zone; with `dateFallbackDays: N` a
 * 404 for that date's file tries the day before, up to N days back. The date
 * read is kept for the run (`ingestion_runs.source_date`); when no date has a
 * file the walk fails `HTTP_404` naming the dates tried, so nothing is delisted.
 */

/** True when the request's path or a query value holds `{date:…}`. */
export function isDated(request: Pick<RequestDefinition, "path" | "query">): boolean {
  return (
    datePatternsIn(request.path).length > 0 ||
    Object.values(request.query).some((v) => datePatternsIn(v).length > 0)
  );
}

/** The request with its `{date:…}` placeholders filled for `date`. */
export function datedRequest<R extends Pick<RequestDefinition, "path" | "query">>(
  request: R,
  date: CalendarDate,
): R {
  return {
    ...request,
    path: fillDates(request.path, date),
    query: Object.fromEntries(Object.entries(request.query).map(([k, v]) => [k, fillDates(v, date)])),
  };
}

/**
 * Walks the file of today, else of each earlier day up to `fallbackDays` back, with
 * `open(date, attemptsBefore)`: the first that does not answer 404 is read. Only the
 * opening request's 404 falls back; a failure once a file is open is the walk's.
 */
export async function* walkDatedFile(
  open: (date: CalendarDate, attemptsBefore: number) => AsyncGenerator<Page>,
  o: { now: number; timeZone?: string | undefined; fallbackDays: number; ctx: WalkContext },
): AsyncGenerator<Page> {
  const today = dateIn(o.now, o.timeZone ?? "UTC");
  let attempts = 0;
  const tried: string[] = [];
  for (let back = 0; back <= o.fallbackDays; back++) {
    const date = addDays(today, -back);
    const pages = open(date, attempts);
    let first: IteratorResult<Page, void>;
    try {
      first = await pages.next();
    } catch (err) {
      if (isIngestionError(err) && err.code === "HTTP_404") {
        tried.push(isoDate(date));
        attempts += err.attempts ?? 1;
        if (back < o.fallbackDays) {
          o.ctx.log.info({ date: isoDate(date) }, "no file for this date (HTTP 404): trying the day before");
          continue;
        }
        throw new IngestionError(
          "HTTP_404",
          `no dated file found: the supplier answered HTTP 404 for ${tried.join(", ")} (request.dateFallbackDays ${o.fallbackDays})`,
          { attempts },
        );
      }
      throw err;
    }
    if (o.ctx.conditional) o.ctx.conditional.sourceDate = isoDate(date);
    try {
      if (first.done) return;
      yield first.value;
      for (;;) {
        const next = await pages.next();
        if (next.done) return;
        yield next.value;
      }
    } finally {
      await pages.return(undefined);
    }
  }
}
