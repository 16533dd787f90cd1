/**
 * The supplier simulator: a deterministic fake supplier API over real HTTP on
 * loopback, used by the demo, the tests, the fault suite and the benchmarks.
 */
export { invalidKindOf, skuOf } from "./catalog.js";
export { DEMO_SUPPLIERS } from "./cli.js";
export { startSimulator } from "./server.js";
export type {
  SimAuth,
  SimPagination,
  Simulator,
  SimulatorFaults,
  SimulatorMutation,
  SimulatorRecord,
  SimulatorStats,
  SimulatorSupplierOptions,
  SimulatorWalk,
  StartSimulatorOptions,
} from "./types.js";
