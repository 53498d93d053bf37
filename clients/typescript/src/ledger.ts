import type { CallOptions, Transport } from "./http.js";
import type {
  BatchRecorded,
  LedgerSession,
  LedgerVerification,
  RecordRequest,
  ReportQuery,
  Score,
  SessionRequest,
  Transaction,
  TransactionsQuery,
} from "./types.js";

type Json = Record<string, unknown>;

/** `/v1/ledger`: rewards and penalties with a running score, checked against the log. */
export class LedgerApi {
  readonly #http: Transport;

  constructor(http: Transport) {
    this.#http = http;
  }

  /** One reward or penalty; `points` defaults to the category's, `key` makes retries safe. */
  record(transaction: RecordRequest, options?: CallOptions): Promise<Transaction> {
    return this.#http.request("POST", "/v1/ledger/record", { ...options, body: transaction });
  }

  /** Several transactions, recorded atomically: all of them or none. */
  recordBatch(transactions: RecordRequest[], options?: CallOptions): Promise<BatchRecorded> {
    return this.#http.request("POST", "/v1/ledger/record-batch", { ...options, body: { transactions } });
  }

  score(options?: CallOptions): Promise<Score> {
    return this.#http.request("GET", "/v1/ledger/score", options);
  }

  /** The newest transactions, newest first. */
  async transactions(query: TransactionsQuery = {}, options?: CallOptions): Promise<Transaction[]> {
    const out = await this.#http.request<{ transactions: Transaction[] }>("GET", "/v1/ledger/transactions", {
      ...options,
      query,
    });
    return out.transactions;
  }

  breakdown(options?: CallOptions): Promise<Json> {
    return this.#http.request("GET", "/v1/ledger/breakdown", options);
  }

  metrics(options?: CallOptions): Promise<Json> {
    return this.#http.request("GET", "/v1/ledger/metrics", options);
  }

  /** Checksum and log verification; `full` recalculates from the first transaction. */
  verify(query: { full?: boolean } = {}, options?: CallOptions): Promise<LedgerVerification> {
    return this.#http.request("GET", "/v1/ledger/verify", { ...options, query });
  }

  /** Halts, audits and recoveries, newest first. */
  async incidents(query: { limit?: number } = {}, options?: CallOptions): Promise<Json[]> {
    const out = await this.#http.request<{ incidents: Json[] }>("GET", "/v1/ledger/incidents", {
      ...options,
      query,
    });
    return out.incidents;
  }

  async sessions(options?: CallOptions): Promise<LedgerSession[]> {
    const out = await this.#http.request<{ sessions: LedgerSession[] }>(
      "GET",
      "/v1/ledger/sessions",
      options,
    );
    return out.sessions;
  }

  startSession(request: SessionRequest = {}, options?: CallOptions): Promise<LedgerSession> {
    return this.#http.request("POST", "/v1/ledger/sessions/start", { ...options, body: request });
  }

  endSession(request: SessionRequest = {}, options?: CallOptions): Promise<LedgerSession> {
    return this.#http.request("POST", "/v1/ledger/sessions/end", { ...options, body: request });
  }

  /** The six-step audit. */
  audit(options?: CallOptions): Promise<Json> {
    return this.#http.request("POST", "/v1/ledger/audit", options);
  }

  /** Compare the score with the log; `recover` also re-applies missing transactions. */
  reconcile(request: { recover?: boolean } = {}, options?: CallOptions): Promise<Json> {
    return this.#http.request("POST", "/v1/ledger/reconcile", { ...options, body: request });
  }

  checkpoint(options?: CallOptions): Promise<Json> {
    return this.#http.request("POST", "/v1/ledger/checkpoint", options);
  }

  applyRules(options?: CallOptions): Promise<Json> {
    return this.#http.request("POST", "/v1/ledger/apply-rules", options);
  }

  report(query: ReportQuery = {}, options?: CallOptions): Promise<Json> {
    return this.#http.request("GET", "/v1/ledger/report", { ...options, query });
  }

  /** The progress.json document. */
  progress(options?: CallOptions): Promise<Json> {
    return this.#http.request("GET", "/v1/ledger/progress", options);
  }
}
