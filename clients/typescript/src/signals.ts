import type { CallOptions, Transport } from "./http.js";
import type {
  DecisionRequest,
  ExportRequest,
  ExportSummary,
  Gates,
  GatesQuery,
  OutcomeRequest,
  OverrideRequest,
  SignalAudit,
  SignalAuditRequest,
  SignalEvaluateRequest,
  SignalEvaluation,
  SignalReceipt,
  SummaryQuery,
} from "./types.js";

/** `/v1/signals`: a router's decisions and their outcomes, exported as training data. */
export class SignalsApi {
  readonly #http: Transport;

  constructor(http: Transport) {
    this.#http = http;
  }

  /** Record which task the router chose; idempotent per `decision_id`. */
  decision(decision: DecisionRequest, options?: CallOptions): Promise<SignalReceipt> {
    return this.#http.request("POST", "/v1/signals/decision", { ...options, body: decision });
  }

  /** Record how the decision turned out; idempotent per `decision_id`. */
  outcome(outcome: OutcomeRequest, options?: CallOptions): Promise<SignalReceipt> {
    return this.#http.request("POST", "/v1/signals/outcome", { ...options, body: outcome });
  }

  /** Record that a person replaced the router's choice. */
  override(override: OverrideRequest, options?: CallOptions): Promise<SignalReceipt> {
    return this.#http.request("POST", "/v1/signals/override", { ...options, body: override });
  }

  /**
   * Write train/val/test files to `output_dir` under the server's export root
   * (`PLAUDIT_EXPORT_ROOT`); answers the summary. Without an export root the server answers
   * 400; `summary()` computes the same summary without writing anything.
   */
  export(request: ExportRequest, options?: CallOptions): Promise<ExportSummary> {
    return this.#http.request("POST", "/v1/signals/export", { ...options, body: request });
  }

  /** Audit an export summary (given, or a file under the export root), else the log itself. */
  audit(request: SignalAuditRequest = {}, options?: CallOptions): Promise<SignalAudit> {
    return this.#http.request("POST", "/v1/signals/audit", { ...options, body: request });
  }

  /**
   * Estimate what a candidate policy (a JSON table; the server never imports code) would have
   * earned on the logged decisions: IPS, SNIPS and doubly robust, with bootstrap intervals.
   */
  evaluate(request: SignalEvaluateRequest, options?: CallOptions): Promise<SignalEvaluation> {
    return this.#http.request("POST", "/v1/signals/evaluate", { ...options, body: request });
  }

  /** The reference gates over the log, with default thresholds. */
  gates(query: GatesQuery = {}, options?: CallOptions): Promise<Gates> {
    return this.#http.request("GET", "/v1/signals/gates", { ...options, query });
  }

  /** The export summary of the log, computed in memory. */
  summary(query: SummaryQuery = {}, options?: CallOptions): Promise<ExportSummary> {
    return this.#http.request("GET", "/v1/signals/summary", { ...options, query });
  }
}
