/**
 * @plaudit/client: a dependency-free TypeScript client for plaudit's HTTP API (`plaudit serve`).
 */
export { PlauditClient, type CallSpec } from "./client.js";
export { BanditApi } from "./bandit.js";
export { LedgerApi } from "./ledger.js";
export { LogApi } from "./log.js";
export { SignalsApi } from "./signals.js";
export {
  type ErrorBody,
  PlauditError,
  PlauditHttpError,
  PlauditNetworkError,
  PlauditResponseError,
  PlauditTimeoutError,
  type ValidationProblem,
} from "./errors.js";
export {
  type CallOptions,
  type ClientOptions,
  DEFAULT_TIMEOUT_MS,
  DEFAULT_URL,
  type FetchLike,
  type QueryValue,
} from "./http.js";
export type * from "./types.js";
export type { components, operations, paths } from "./generated/openapi.js";
