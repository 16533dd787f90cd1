/**
 * The frame shared by the console pages: one self-contained HTML document with its
 * style inline, no script, no external resource (the favicon is a `data:` URL, so
 * the browser does not ask for `/favicon.ico` either), so the CSP (docs/operations.md, Operator console)
 * (`default-src 'none'; style-src 'unsafe-inline'; img-src data:`) holds as it is.
 */
import type { RunOwner, RunState } from "../../ingestion/ports.js";
import { formatElapsed } from "../../platform/duration.js";
import { Html, html } from "./html.js";

/** The response headers of every console page (docs/operations.md, Operator console). */
export const CONSOLE_HEADERS: Readonly<Record<string, string>> = {
  "Content-Security-Policy": "default-src 'none'; style-src 'unsafe-inline'; img-src data:",
  "X-Content-Type-Options": "nosniff",
  "Referrer-Policy": "no-referrer",
  "X-Frame-Options": "DENY",
};

export const HTML_CONTENT_TYPE = "text/html; charset=utf-8";

/** Who serves the page: shown in every page's header. */
export interface ConsoleInstance {
  owner: RunOwner;
  version: string;
}

/** The supplier page's and run page's additions (charts, filters, pager, wrapped cells). */
const SUPPLIER_STYLE = `
.badge.paused { background: #5b4b8a; }
table.overview { width: 100%; }
table.overview th { white-space: normal; vertical-align: bottom; }
table.overview td[data-last-run], table.overview td:first-child { white-space: normal; overflow-wrap: break-word; }
table.overview td[data-last-run] { min-width: 12em; }
table.overview td:first-child { min-width: 8em; max-width: 14em; }
.badge, .err { white-space: nowrap; }
table.overview td.num, table.overview th.num { padding: 5px 5px; }
.badge.held { background: var(--partial); }
dl.cols.narrow { max-width: 900px; }
nav.crumbs, nav.pager { margin: 8px 0; display: flex; gap: 6px 12px; flex-wrap: wrap; align-items: baseline; }
form.filters { display: flex; gap: 8px 16px; align-items: center; flex-wrap: wrap; margin: 0 0 8px; }
table.wide { width: 100%; max-width: 1400px; }
td.wrap { white-space: normal; word-break: break-word; max-width: 320px; }
table.inner { border: 0; }
table.inner th, table.inner td { padding: 2px 8px; }
.charts { display: flex; flex-wrap: wrap; gap: 12px; }
figure.chart { margin: 0; background: #fff; border: 1px solid #ddd; padding: 6px 8px; flex: 1 1 360px; max-width: 520px; }
figure.chart figcaption { font-size: 12px; font-weight: 600; color: #444; }
figure.chart svg { display: block; width: 100%; height: auto; }
figure.chart .frame { stroke: #bbb; stroke-width: 1; }
figure.chart .axis { font-size: 9px; fill: #777; }
figure.chart .threshold { stroke: var(--stale); stroke-dasharray: 4 3; stroke-width: 1; }
figure.chart .trend { fill: none; stroke: #9bb4dd; stroke-width: 1.2; }
figure.chart .s { fill: var(--ok); }
figure.chart .p { fill: var(--partial); }
figure.chart .f { fill: var(--stale); }
figure.chart .r { fill: var(--running); }
figure.chart a:hover rect, figure.chart a:hover circle { opacity: 0.6; }
`;

const STYLE = `
:root { color-scheme: light; --ok: #1b7f3b; --stale: #b3261e; --none: #6b6b6b; --partial: #b26a00; --running: #1f5fbf; }
* { box-sizing: border-box; }
body { margin: 0; font: 14px/1.4 system-ui, -apple-system, "Segoe UI", Roboto, sans-serif; color: #1d1d1f; background: #fafafa; }
header { background: #20232a; color: #f0f0f0; padding: 10px 20px; display: flex; flex-wrap: wrap; gap: 6px 24px; align-items: baseline; }
header h1 { font-size: 17px; margin: 0; }
header h1 a { color: inherit; text-decoration: none; }
header .meta { font-size: 12px; color: #c8c8c8; }
header .meta b { color: #fff; font-weight: 600; }
main { padding: 16px 20px 40px; }
h2 { font-size: 16px; margin: 24px 0 8px; }
table { border-collapse: collapse; background: #fff; border: 1px solid #ddd; }
th, td { padding: 5px 9px; border-bottom: 1px solid #eee; text-align: left; vertical-align: middle; white-space: nowrap; }
th { background: #f2f2f2; font-weight: 600; font-size: 12px; color: #444; }
td.num, th.num { text-align: right; font-variant-numeric: tabular-nums; }
tr:hover td { background: #f7f9fc; }
a { color: #1f5fbf; }
.muted { color: #888; }
.badge { display: inline-block; padding: 1px 8px; border-radius: 10px; font-size: 12px; font-weight: 600; color: #fff; }
.badge.ok, .badge.succeeded { background: var(--ok); }
.badge.stale, .badge.failed { background: var(--stale); }
.badge.none, .badge.paused { background: var(--none); }
.badge.partial, .badge.held { background: var(--partial); }
.badge.running { background: var(--running); }
.sub { font-size: 11px; white-space: nowrap; }
.code { font-family: ui-monospace, "SFMono-Regular", Menlo, Consolas, monospace; font-size: 12px; }
.err { color: var(--stale); font-weight: 600; }
.summary { display: flex; gap: 16px; margin: 0 0 12px; flex-wrap: wrap; }
.summary span { background: #fff; border: 1px solid #ddd; border-radius: 6px; padding: 4px 10px; }
.age-bar { display: inline-block; width: 50px; height: 6px; background: #e5e5e5; border-radius: 3px; margin-right: 6px; vertical-align: middle; overflow: hidden; }
.age-bar i { display: block; height: 100%; background: var(--ok); }
.age-bar i.over { background: var(--stale); }
svg.strip rect { width: 6px; height: 16px; }
svg.strip rect.s { fill: var(--ok); }
svg.strip rect.p { fill: var(--partial); }
svg.strip rect.f { fill: var(--stale); }
svg.strip rect.r { fill: var(--running); }
svg.strip rect.e { fill: #eee; }
svg.strip a:hover rect { opacity: 0.6; }
dl.cols { display: grid; grid-template-columns: max-content 1fr; gap: 3px 16px; background: #fff; border: 1px solid #ddd; padding: 10px 14px; margin: 0; max-width: 1100px; }
dl.cols dt { font-weight: 600; color: #444; }
dl.cols dd { margin: 0; white-space: pre-wrap; word-break: break-word; }
.reject { background: #fff; border: 1px solid #ddd; margin: 0 0 10px; padding: 8px 12px; max-width: 1100px; }
.reject h3 { font-size: 13px; margin: 0 0 6px; font-weight: 600; }
.reject pre { margin: 0; padding: 8px; background: #f6f6f6; overflow: auto; max-height: 420px; white-space: pre-wrap; word-break: break-all; font-size: 12px; }
.note { color: #555; font-style: italic; margin: 6px 0; }
.banner { background: #fde8e7; border: 1px solid var(--stale); color: #6e1510; padding: 8px 12px; margin: 0 0 12px; }
${SUPPLIER_STYLE}`;

/** A constant of this module, so trusted as markup (inside <style> entities would not be decoded). */
const STYLE_HTML = new Html(STYLE);

/** One console page: `title` escaped, `body` trusted markup made by {@link html}. */
export function page(title: string, instance: ConsoleInstance, database: string, body: Html): Html {
  return html`<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<meta name="referrer" content="no-referrer">
<link rel="icon" href="data:,">
<title>${title} · supplier-sync</title>
<style>${STYLE_HTML}</style>
</head>
<body>
<header>
<h1><a href="/">supplier-sync</a></h1>
<span class="meta">version <b>${instance.version}</b></span>
<span class="meta">instance <b class="code">${instance.owner.hostname}</b> pid <b>${instance.owner.pid}</b> boot <b class="code">${instance.owner.bootId}</b></span>
<span class="meta" data-database="${database}">database <b>${database}</b></span>
</header>
<main>
${body}
</main>
</body>
</html>
`;
}

export function stateBadge(state: RunState | "ok" | "stale" | "none" | "held" | "paused"): Html {
  return html`<span class="badge ${state}">${state}</span>`;
}

/** `2026-12-01 08:00:00Z`, seconds precision. */
export function formatTime(date: Date | null): string {
  if (date === null) return "—";
  const iso = date.toISOString();
  return `${iso.slice(0, 10)} ${iso.slice(11, 19)}Z`;
}

/** Duration of a run or step, `running` while it has no end. */
export function formatSpan(startedAt: Date, finishedAt: Date | null): string {
  if (finishedAt === null) return "running";
  return formatElapsed(finishedAt.getTime() - startedAt.getTime());
}
