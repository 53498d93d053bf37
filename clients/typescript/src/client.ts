import { BanditApi } from "./bandit.js";
import type { paths } from "./generated/openapi.js";
import { type CallOptions, type ClientOptions, type QueryValue, Transport } from "./http.js";
import { LedgerApi } from "./ledger.js";
import { LogApi } from "./log.js";
import { SignalsApi } from "./signals.js";
import type {
  BodyOf,
  BodyOptional,
  Health,
  HttpMethod,
  PathParamsOf,
  PathsFor,
  QueryOf,
  ResponseOf,
} from "./types.js";

/** What `call` takes besides method and path; each part is typed from the OpenAPI document. */
export type CallSpec<P extends keyof paths, M extends HttpMethod> = CallOptions & {
  query?: QueryOf<P, M>;
} & ({} extends PathParamsOf<P, M> ? { params?: never } : { params: PathParamsOf<P, M> }) &
  ([BodyOf<P, M>] extends [never]
    ? { body?: never }
    : BodyOptional<P, M> extends true
      ? { body?: BodyOf<P, M> }
      : { body: BodyOf<P, M> });

/**
 * A client for one plaudit server.
 *
 * ```ts
 * const plaudit = new PlauditClient({ baseUrl: "http://127.0.0.1:8377", token: process.env.PLAUDIT_TOKEN });
 * const sel = await plaudit.bandit.select({ token_budget: 8000, context: "coding" });
 * ```
 */
export class PlauditClient {
  readonly bandit: BanditApi;
  readonly ledger: LedgerApi;
  readonly signals: SignalsApi;
  readonly log: LogApi;
  readonly #http: Transport;

  constructor(options: ClientOptions = {}) {
    this.#http = new Transport(options);
    this.bandit = new BanditApi(this.#http);
    this.ledger = new LedgerApi(this.#http);
    this.signals = new SignalsApi(this.#http);
    this.log = new LogApi(this.#http);
  }

  /** The server URL this client talks to. */
  get baseUrl(): string {
    return this.#http.baseUrl;
  }

  /** Liveness, backend, log length and head, and whether writes need a token. */
  health(options?: CallOptions): Promise<Health> {
    return this.#http.request("GET", "/v1/health", options);
  }

  /** The server's OpenAPI document. */
  openapi(options?: CallOptions): Promise<Record<string, unknown>> {
    return this.#http.request("GET", "/openapi.json", options);
  }

  /**
   * Any operation in the OpenAPI document, typed from it: the escape hatch for endpoints that
   * have no method here yet (regenerate the types with `npm run gen` and they are typed too).
   *
   * ```ts
   * await plaudit.call("get", "/v1/bandit/arms/{arm_id}", { params: { arm_id: "tool:exec:Bash" } });
   * ```
   */
  call<M extends HttpMethod, P extends PathsFor<M>>(
    method: M,
    path: P,
    ...spec: {} extends CallSpec<P, M> ? [CallSpec<P, M>?] : [CallSpec<P, M>]
  ): Promise<ResponseOf<P, M>> {
    const { params, query, body, ...options } = (spec[0] ?? {}) as CallOptions & {
      params?: Record<string, string | number>;
      query?: Record<string, QueryValue>;
      body?: unknown;
    };
    const filled = (path as string).replace(/\{([^}]+)\}/g, (_, name: string) => {
      const value = params?.[name];
      if (value === undefined) throw new TypeError(`params.${name} is required by ${path}`);
      return encodeURIComponent(String(value));
    });
    const verb = method.toUpperCase() as "GET" | "POST";
    return this.#http.request(verb, filled, { ...options, query, body });
  }
}
