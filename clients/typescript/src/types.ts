/**
 * Request types come from the generated OpenAPI types, so they follow the server exactly.
 * The server declares its responses only as JSON objects, so the response types below are
 * written by hand from what it sends; each is open (`[key: string]: unknown`) so a field the
 * server adds later is still there to read.
 */
import type { components, paths } from "./generated/openapi.js";

type Schemas = components["schemas"];

// ---- requests (generated) ----------------------------------------------------------------

export type ArmInput = Schemas["ArmIn"];
export type SelectRequest = Schemas["SelectIn"];
export type ObserveRequest = Schemas["ObserveIn"];
export type ToolCall = Schemas["ToolCall"];
export type RecordRequest = Schemas["RecordIn"];
export type SessionRequest = Schemas["SessionIn"];
export type DecisionRequest = Schemas["DecisionIn"];
export type OutcomeRequest = Schemas["OutcomeIn"];
export type OverrideRequest = Schemas["OverrideIn"];
export type ExportRequest = Schemas["ExportIn"];
export type SignalAuditRequest = Schemas["AuditIn"];
export type SignalEvaluateRequest = Schemas["SignalEvaluateIn"];
export type EventInput = Schemas["EventIn"];

export type HttpMethod = "get" | "post";
type Operation<P extends keyof paths, M extends HttpMethod> = NonNullable<paths[P][M]>;

/** Every path that has an operation for method `M`. */
export type PathsFor<M extends HttpMethod> = {
  [P in keyof paths]: [Operation<P, M>] extends [never] ? never : P;
}[keyof paths];

/** The query parameters of an operation (`{}` when it has none). */
export type QueryOf<P extends keyof paths, M extends HttpMethod> =
  Operation<P, M> extends { parameters: { query?: infer Q } }
    ? [Q] extends [never]
      ? {}
      : NonNullable<Q>
    : {};

/** The path parameters of an operation (`{}` when it has none). */
export type PathParamsOf<P extends keyof paths, M extends HttpMethod> =
  Operation<P, M> extends { parameters: { path: infer X } }
    ? [X] extends [never]
      ? {}
      : NonNullable<X>
    : {};

type RequestBody<O> = O extends { requestBody?: infer R } ? NonNullable<R> : never;

/** The JSON body of an operation (`never` when it takes none). */
export type BodyOf<P extends keyof paths, M extends HttpMethod> = [RequestBody<Operation<P, M>>] extends [
  never,
]
  ? never
  : RequestBody<Operation<P, M>> extends { content: { "application/json": infer B } }
    ? B
    : never;

/** Whether the operation's body may be left out. */
export type BodyOptional<P extends keyof paths, M extends HttpMethod> =
  {} extends Pick<Operation<P, M>, "requestBody" & keyof Operation<P, M>> ? true : false;

/** The documented 200 response of an operation. */
export type ResponseOf<P extends keyof paths, M extends HttpMethod> =
  Operation<P, M> extends { responses: { 200: { content: { "application/json": infer R } } } } ? R : unknown;

export type PosteriorsQuery = QueryOf<"/v1/bandit/posteriors", "get">;
export type SavingsQuery = QueryOf<"/v1/bandit/savings", "get">;
export type RunsQuery = QueryOf<"/v1/bandit/runs", "get">;
export type HistoryQuery = QueryOf<"/v1/bandit/history", "get">;
export type TransactionsQuery = QueryOf<"/v1/ledger/transactions", "get">;
export type ReportQuery = QueryOf<"/v1/ledger/report", "get">;
export type GatesQuery = QueryOf<"/v1/signals/gates", "get">;
export type SummaryQuery = QueryOf<"/v1/signals/summary", "get">;
export type TailQuery = QueryOf<"/v1/log/tail", "get">;
export type AppendQuery = QueryOf<"/v1/log/append", "post">;

// ---- responses (hand-written) ------------------------------------------------------------

/** Fields the server may add later remain readable as `unknown`. */
interface Open {
  [key: string]: unknown;
}

export interface Health extends Open {
  ok: boolean;
  version: string;
  backend: string;
  length: number;
  head: string;
  /** Whether write endpoints need the bearer token. */
  write_auth: boolean;
  /** Route modules that failed to mount, with the reason. */
  skipped_routes: Record<string, string>;
}

// bandit

export interface Arm extends Open {
  id: string;
  tokens: number;
  kind: "curated" | "learned";
  content?: string;
}

export interface RegisteredArms extends Open {
  registered: number;
  ids: string[];
}

export interface Selection extends Open {
  /** Pass this to `observe` after the run. */
  run_id: string;
  /** Arms to put in the prompt. */
  included: string[];
  excluded: string[];
  /** A baseline run includes every arm, to measure what selection saves. */
  is_baseline: boolean;
  used_tokens: number;
  budget: number;
  context: string | null;
  phase: string;
  /** Each included arm's probability of being included (the propensity). */
  probabilities: Record<string, number>;
  /**
   * A note to put in the prompt naming what was left out and how to get it, so that what the
   * agent fetches is reported by `observe`; `null` when nothing that can be fetched was left out.
   */
  guidance: string | null;
}

export interface Observation extends Open {
  run_id: string;
  /** 1 for an included arm the run referenced, 0 for one it did not. */
  rewards: Record<string, number>;
  referenced: string[];
  /** Whether the posteriors were updated (not on a repeat, nor an error unless configured). */
  updated: boolean;
  /** `appended`, or `present` when the same observation was sent before. */
  status: string;
}

export interface ArmPosterior extends Open {
  id: string;
  alpha: number;
  beta: number;
  mean: number;
  /** `null` when undefined. */
  variance: number | null;
  ci_low: number | null;
  ci_high: number | null;
  pulls: number;
  confidence: string;
  tokens: number;
  kind: string;
  protected: boolean;
  context: string | null;
  /** Fewer pulls than `min_pulls` (`min_pulls_context` in a context): always included while the inventory fits. */
  underexplored: boolean;
}

export interface Posteriors extends Open {
  context: string | null;
  level: number;
  arms: ArmPosterior[];
}

export interface ArmDetail extends Open {
  arm: Arm;
  global: ArmPosterior;
  contexts: Record<string, ArmPosterior>;
}

export interface HistoryPoint extends Open {
  obs_index: number;
  ts_ms: number;
  mean: number;
  alpha: number;
  beta: number;
}

export interface History extends Open {
  context: string | null;
  arms: Record<string, HistoryPoint[]>;
}

export interface Savings extends Open {
  /** The headline: prompt tokens saved against what each run would have sent without the bandit. */
  prompt_savings_percent: number | null;
  prompt_ci_low: number | null;
  prompt_ci_high: number | null;
  /** What each run would have sent: `the full inventory`, or a random-order fill of the budget. */
  counterfactual: string;
  runs: number;
  /** The seed's comparison: `null` until both baseline and selected runs have been observed. */
  token_savings_percent: number | null;
  ci_low: number | null;
  ci_high: number | null;
  baseline_runs: number;
  selected_runs: number;
  baseline_avg_tokens: number | null;
  selected_avg_tokens: number | null;
}

export interface Run extends Open {
  run_id: string;
  ts_ms: number;
  arms: { id: string; included: boolean; p_include: number; protected: boolean; tokens: number }[];
  budget: number;
  context: string | null;
  is_baseline: boolean;
  used_tokens: number;
  /** `null` until the run is observed. */
  observation: (Open & { rewards: Record<string, number> }) | null;
}

/** A run as `runs()` lists it: its record, how many arms it included, and its outcome once observed. */
export interface RunListed extends Open {
  run_id: string;
  seq: number;
  ts_ms: number;
  session_id: string;
  context: string | null;
  is_baseline: boolean;
  phase: string;
  budget: number;
  used_tokens: number;
  inventory_tokens: number;
  baseline_tokens: number | null;
  included: number;
  observed: boolean;
}

export interface RunListing extends Open {
  session_id: string | null;
  limit: number;
  offset: number;
  runs: RunListed[];
}

export type BanditConfig = Open;

// ledger

export interface Transaction extends Open {
  /** The idempotency key, or a generated id. */
  id: string;
  seq: number;
  timestamp: string;
  ts_ms: number;
  type: "reward" | "penalty";
  category: string;
  points: number;
  action: string;
  source: string | null;
  session_id: string | null;
  running_total: number;
  verified: boolean;
  /** `appended`, or `present` when the key was recorded before. */
  status?: string;
}

export interface BatchRecorded extends Open {
  recorded: number;
  transactions: Transaction[];
}

export interface Score extends Open {
  total_score: number;
  session_score: number;
  lifetime_score: number;
  rewards_total: number;
  penalties_total: number;
  learning_efficiency: number;
  session_id: string | null;
  session_open: boolean;
  trend: { ts_ms: number; total: number }[];
  transactions: number;
  verified: boolean;
  halted: boolean;
  halt_reason: string | null;
}

export interface LedgerVerification extends Open {
  ok: boolean;
  log: LogVerification;
  transactions: number;
  halted: boolean;
  first_discrepancy: unknown;
}

export interface LedgerSession extends Open {
  session_id: string;
  label: string | null;
  started_ms: number;
  ended_ms: number | null;
  open: boolean;
  score: number;
  transactions: number;
}

// signals

/** The receipt for a decision, outcome or override. */
export interface SignalReceipt extends Open {
  id: string;
  type: string;
  decision_id: string;
  session_id: string;
  ts_ms: number;
  /** `appended`, or `present` when the same signal was sent before. */
  status: string;
  seq: number;
  redacted: number;
}

export interface ExportSummary extends Open {
  schema_version: string;
  generated_at_ms: number;
  input: Open;
  counts: Open & {
    decisions: number;
    outcomes: number;
    joined_rows: number;
    overrides: number;
    train_rows: number;
    val_rows: number;
    test_rows: number;
    skipped_old: number;
  };
  quality: Open;
  distributions: Open & { outcomes: Record<string, number>; chosen_tasks: Record<string, number> };
  /** Paths of the files written (on the server); empty for `summary`. */
  outputs: Open;
}

export interface Gate extends Open {
  name: string;
  actual: number | null;
  threshold: number;
  op: string;
  passed: boolean;
}

export interface Gates extends Open {
  passed: boolean;
  gates: Gate[];
}

export interface SignalAudit extends Open {
  schema_version: string;
  pass: boolean;
  gates: Record<string, Open & { actual: number | null; threshold: number; pass: boolean }>;
}

/** One estimator's figures: the mean reward per decision, its interval, and against logging. */
export interface PolicyEstimate extends Open {
  /** null for SNIPS when the candidate never picks a logged task. */
  value: number | null;
  ci: [number, number] | null;
  ess: number;
  difference: number | null;
  difference_ci: [number, number] | null;
}

export interface SignalEvaluation extends Open {
  schema_version: string;
  policy: Open & { kind: "table" | "callable"; name: string; key: string[] };
  counts: Open & {
    decisions: number;
    joined_rows: number;
    evaluated: number;
    missing_propensity: number;
    invalid_propensity: number;
    defaulted_propensity: number;
  };
  propensity: Open & {
    coverage: number;
    invalid_samples: Array<{ decision_id: string; propensity: unknown; reason: string }>;
  };
  /** The logging policy's own mean reward; null when nothing could be evaluated. */
  logging: (Open & { value: number; ci: [number, number] | null }) | null;
  estimates: { ips: PolicyEstimate | null; snips: PolicyEstimate | null; dr: PolicyEstimate | null };
  effective_sample_size: number;
  gates: Record<string, Open & { actual: number; threshold: number; pass: boolean }>;
  /** False when nothing could be evaluated or a gate failed. */
  pass: boolean;
  note: string | null;
}

// log

export interface LogHead extends Open {
  length: number;
  hash: string;
  /** `length:hash`; keep it to check later, with `verify({against})`, that history is unchanged. */
  digest: string;
}

export interface LogVerification extends Open {
  /** False when the chain is broken; the request itself still succeeds. */
  ok: boolean;
  length: number;
  checked: number;
  head: string;
  first_bad: number | null;
  reason: string | null;
  against: string | null;
}

export interface AppendResult extends Open {
  appended: number;
  present: number;
  /** With `wait: false` on PostgreSQL: events durable in the intake, not yet given positions. */
  queued: number;
  /** Ids skipped because they exist with other content (`onConflict: "skip"`). */
  conflicts: string[];
  /** `seq` is null for a `queued` event. */
  results: { id: string; seq: number | null; status: string }[];
  head: string;
}

export interface StoredEvent extends Open {
  id: string;
  type: string;
  ts_ms: number;
  session_id: string;
  source: string;
  payload: Record<string, unknown>;
  meta: Record<string, unknown>;
  seq: number;
  hash: string;
}

export interface LogStats extends Open {
  backend: string;
  length: number;
  head: string;
  sessions: number;
  first_ts_ms: number | null;
  last_ts_ms: number | null;
  by_type: Record<string, number>;
}
