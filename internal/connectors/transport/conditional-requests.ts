import type { ConditionalWalk, WalkContext } from "../../ingestion/ports.js";
import type { ConnectorDefinition } from "../schema/connector-schema.js";

/**
 * docs/conditional-requests.md: only a walk that is one request can be answered "not modified" as a
 * whole. Partitions, SKU lists, pagination and export jobs make several requests whose
 * validators say nothing about the catalog, so they never send any.
 */
export function isOneRequestWalk(def: ConnectorDefinition): boolean {
  // An export job (docs/feeds.md, Export jobs) makes a create, polls and a download.
  return (
    def.pagination.type === "none" &&
    def.partitions === undefined &&
    def.skus === undefined &&
    def.export === undefined
  );
}

/** The walk's conditional state when this definition may use it (`conditional` on, one request), else undefined. */
export function conditionalOf(def: ConnectorDefinition, ctx: WalkContext): ConditionalWalk | undefined {
  return def.conditional && isOneRequestWalk(def) ? ctx.conditional : undefined;
}
