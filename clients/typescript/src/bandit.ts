import type { CallOptions, Transport } from "./http.js";
import type {
  Arm,
  ArmDetail,
  ArmInput,
  BanditConfig,
  History,
  HistoryQuery,
  Observation,
  ObserveRequest,
  Posteriors,
  PosteriorsQuery,
  RegisteredArms,
  Run,
  RunListing,
  RunsQuery,
  Savings,
  SavingsQuery,
  Selection,
  SelectRequest,
} from "./types.js";

/** `/v1/bandit`: choose which prompt components (arms) to include, then learn from the run. */
export class BanditApi {
  readonly #http: Transport;

  constructor(http: Transport) {
    this.#http = http;
  }

  /** Register (or update) arms so later `select` calls may omit them. */
  registerArms(arms: ArmInput[], options?: CallOptions): Promise<RegisteredArms> {
    return this.#http.request("POST", "/v1/bandit/arms", { ...options, body: { arms } });
  }

  async arms(options?: CallOptions): Promise<Arm[]> {
    const out = await this.#http.request<{ arms: Arm[] }>("GET", "/v1/bandit/arms", options);
    return out.arms;
  }

  /** One arm with its global posterior and its posterior in each context. */
  arm(id: string, options?: CallOptions): Promise<ArmDetail> {
    return this.#http.request("GET", `/v1/bandit/arms/${encodeURIComponent(id)}`, options);
  }

  /** Choose the arms for one run within `token_budget`; keep `run_id` for `observe`. */
  select(request: SelectRequest = {}, options?: CallOptions): Promise<Selection> {
    return this.#http.request("POST", "/v1/bandit/select", { ...options, body: request });
  }

  /** Report what the run produced; referenced arms are rewarded, unused ones are not. */
  observe(request: ObserveRequest, options?: CallOptions): Promise<Observation> {
    return this.#http.request("POST", "/v1/bandit/observe", { ...options, body: request });
  }

  /** A run as selected, with its observation once there is one. */
  run(runId: string, options?: CallOptions): Promise<Run> {
    return this.#http.request("GET", `/v1/bandit/runs/${encodeURIComponent(runId)}`, options);
  }

  /** Recorded runs, newest first, of one session (`session_id`) or all; page with `limit` and `offset`. */
  runs(query: RunsQuery = {}, options?: CallOptions): Promise<RunListing> {
    return this.#http.request("GET", "/v1/bandit/runs", { ...options, query });
  }

  posteriors(query: PosteriorsQuery = {}, options?: CallOptions): Promise<Posteriors> {
    return this.#http.request("GET", "/v1/bandit/posteriors", { ...options, query });
  }

  async contexts(options?: CallOptions): Promise<string[]> {
    const out = await this.#http.request<{ contexts: string[] }>("GET", "/v1/bandit/contexts", options);
    return out.contexts;
  }

  /** Prompt tokens saved against each run's counterfactual (`prompt_savings_percent`), with an interval. */
  savings(query: SavingsQuery = {}, options?: CallOptions): Promise<Savings> {
    return this.#http.request("GET", "/v1/bandit/savings", { ...options, query });
  }

  /** Posterior mean over time, per arm. */
  history(query: HistoryQuery = {}, options?: CallOptions): Promise<History> {
    return this.#http.request("GET", "/v1/bandit/history", { ...options, query });
  }

  config(options?: CallOptions): Promise<BanditConfig> {
    return this.#http.request("GET", "/v1/bandit/config", options);
  }

  /** Change policy settings (see docs/bandit.md); answers the whole new configuration. */
  configure(changes: Record<string, unknown>, options?: CallOptions): Promise<BanditConfig> {
    return this.#http.request("POST", "/v1/bandit/config", { ...options, body: changes });
  }
}
