import type { CallOptions, Transport } from "./http.js";
import type {
  AppendQuery,
  AppendResult,
  EventInput,
  LogHead,
  LogStats,
  LogVerification,
  StoredEvent,
  TailQuery,
} from "./types.js";

/** `/v1/log`: the append-only, hash-chained event log everything else is built on. */
export class LogApi {
  readonly #http: Transport;

  constructor(http: Transport) {
    this.#http = http;
  }

  /**
   * Append one event or a list, atomically. Give each event an `id` to retry safely: an id
   * already there with the same content answers `present`; with other content, 409 (or, with
   * `on_conflict: "skip"`, the id is listed under `conflicts`). With `wait: false` the answer
   * comes once the events are durable, before they have positions (`queued`; PostgreSQL only).
   */
  append(
    events: EventInput | EventInput[],
    query: AppendQuery = {},
    options?: CallOptions,
  ): Promise<AppendResult> {
    return this.#http.request("POST", "/v1/log/append", { ...options, query, body: events });
  }

  /** Recompute the whole chain. A broken chain is `ok: false`, not an error. */
  verify(query: { against?: string | null } = {}, options?: CallOptions): Promise<LogVerification> {
    return this.#http.request("GET", "/v1/log/verify", { ...options, query });
  }

  head(options?: CallOptions): Promise<LogHead> {
    return this.#http.request("GET", "/v1/log/head", options);
  }

  stats(options?: CallOptions): Promise<LogStats> {
    return this.#http.request("GET", "/v1/log/stats", options);
  }

  /** The newest `n` events (of the `type` prefixes, if given), oldest first. */
  async tail(query: TailQuery = {}, options?: CallOptions): Promise<StoredEvent[]> {
    const out = await this.#http.request<{ events: StoredEvent[] }>("GET", "/v1/log/tail", {
      ...options,
      query,
    });
    return out.events;
  }

  /** One event by id; a missing id is a `PlauditHttpError` with status 404. */
  event(id: string, options?: CallOptions): Promise<StoredEvent> {
    return this.#http.request("GET", `/v1/log/events/${encodeURIComponent(id)}`, options);
  }
}
