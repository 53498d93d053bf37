/**
 * The one place the client touches the network: builds the URL, sends JSON with the token,
 * enforces the timeout and turns every failure into a `PlauditError`.
 */
import {
  type ErrorBody,
  PlauditHttpError,
  PlauditNetworkError,
  PlauditResponseError,
  PlauditTimeoutError,
} from "./errors.js";

export const DEFAULT_URL = "http://127.0.0.1:8377";
export const DEFAULT_TIMEOUT_MS = 30_000;
const ERROR_TEXT_KEPT = 500;

export type FetchLike = (input: string, init: RequestInit) => Promise<Response>;

export interface ClientOptions {
  /** Server URL. Default: `$PLAUDIT_URL`, else `http://127.0.0.1:8377`. */
  baseUrl?: string;
  /** Bearer token for write endpoints. Default: `$PLAUDIT_TOKEN`, if set. */
  token?: string;
  /** Milliseconds before a request fails with `PlauditTimeoutError` (0: never). Default 30 s. */
  timeoutMs?: number;
  /** Extra headers sent with every request. */
  headers?: Record<string, string>;
  /** A `fetch` to use instead of the global one (for proxies, tracing or tests). */
  fetch?: FetchLike;
}

/** Options every method accepts as its last argument. */
export interface CallOptions {
  /** Abort this call; the `AbortError` is thrown as is. */
  signal?: AbortSignal;
  /** Overrides the client's `timeoutMs` for this call. */
  timeoutMs?: number;
  /**
   * W3C trace context of the span this call belongs to (`00-<trace id>-<span id>-<flags>`): the
   * events it writes carry it, so tracing backends attach plaudit's evaluations to that span.
   */
  traceparent?: string;
}

export type QueryValue =
  string | number | boolean | null | undefined | readonly (string | number | boolean)[];

export interface RequestSpec extends CallOptions {
  query?: Record<string, QueryValue> | undefined;
  body?: unknown;
}

/** Reads an environment variable where there is one (Node, Deno, Bun), never in a browser. */
function env(name: string): string | undefined {
  const proc = (globalThis as { process?: { env?: Record<string, string | undefined> } }).process;
  const value = proc?.env?.[name]?.trim();
  return value ? value : undefined;
}

/** `{n: 2, type: ["a.", "b."]}` -> `?n=2&type=a.&type=b.`; null and undefined are left out. */
export function queryString(query: Record<string, QueryValue> | undefined): string {
  if (!query) return "";
  const params = new URLSearchParams();
  for (const [key, value] of Object.entries(query)) {
    if (value === undefined || value === null) continue;
    for (const item of Array.isArray(value) ? value : [value]) params.append(key, String(item));
  }
  const text = params.toString();
  return text ? `?${text}` : "";
}

function errorBody(status: number, statusText: string, text: string): ErrorBody {
  try {
    const parsed: unknown = JSON.parse(text);
    if (
      parsed !== null &&
      typeof parsed === "object" &&
      typeof (parsed as ErrorBody).error === "string" &&
      typeof (parsed as ErrorBody).message === "string"
    ) {
      return parsed as ErrorBody;
    }
  } catch {
    // not JSON: described below
  }
  const shown = text.trim().slice(0, ERROR_TEXT_KEPT);
  return {
    error: "HTTPError",
    message: shown ? `${statusText || `HTTP ${status}`}: ${shown}` : statusText || `HTTP ${status}`,
  };
}

export class Transport {
  readonly baseUrl: string;
  readonly timeoutMs: number;
  readonly #token: string | undefined;
  readonly #headers: Record<string, string>;
  readonly #fetch: FetchLike;

  constructor(options: ClientOptions = {}) {
    const base = options.baseUrl ?? env("PLAUDIT_URL") ?? DEFAULT_URL;
    let parsed: URL;
    try {
      parsed = new URL(base);
    } catch {
      throw new TypeError(`baseUrl: ${JSON.stringify(base)} is not an absolute URL such as ${DEFAULT_URL}`);
    }
    if (parsed.protocol !== "http:" && parsed.protocol !== "https:") {
      throw new TypeError(`baseUrl: ${JSON.stringify(base)} must be an http:// or https:// URL`);
    }
    this.baseUrl = base.replace(/\/+$/, "");
    const timeoutMs = options.timeoutMs ?? DEFAULT_TIMEOUT_MS;
    if (!Number.isFinite(timeoutMs) || timeoutMs < 0) {
      throw new TypeError(`timeoutMs: ${timeoutMs} must be a number of milliseconds >= 0`);
    }
    this.timeoutMs = timeoutMs;
    this.#token = options.token ?? env("PLAUDIT_TOKEN");
    this.#headers = { ...options.headers };
    const fetchImpl = options.fetch ?? (globalThis.fetch as FetchLike | undefined);
    if (!fetchImpl) {
      throw new TypeError("no global fetch: use Node 18 or later, or pass options.fetch");
    }
    this.#fetch = fetchImpl;
  }

  async request<T>(method: "GET" | "POST", path: string, spec: RequestSpec = {}): Promise<T> {
    const url = `${this.baseUrl}${path}${queryString(spec.query)}`;
    const headers: Record<string, string> = { accept: "application/json", ...this.#headers };
    if (this.#token) headers.authorization = `Bearer ${this.#token}`;
    if (spec.traceparent) headers.traceparent = spec.traceparent;
    const init: RequestInit = { method, headers };
    if (spec.body !== undefined) {
      headers["content-type"] = "application/json";
      init.body = JSON.stringify(spec.body);
    }

    const timeoutMs = spec.timeoutMs ?? this.timeoutMs;
    const controller = new AbortController();
    let timedOut = false;
    const timer =
      timeoutMs > 0
        ? setTimeout(() => {
            timedOut = true;
            controller.abort();
          }, timeoutMs)
        : undefined;
    const onAbort = () => controller.abort(spec.signal?.reason);
    if (spec.signal?.aborted) onAbort();
    spec.signal?.addEventListener("abort", onAbort, { once: true });
    init.signal = controller.signal;

    try {
      let res: Response;
      let text: string;
      try {
        res = await this.#fetch(url, init);
        text = await res.text(); // inside the timeout: a body that stalls is a timeout too
      } catch (err) {
        if (timedOut) throw new PlauditTimeoutError(method, url, timeoutMs);
        if (spec.signal?.aborted) throw err;
        const reason =
          err instanceof Error ? (err.cause instanceof Error ? err.cause.message : err.message) : String(err);
        throw new PlauditNetworkError(`${method} ${url} failed: ${reason}`, method, url, err);
      }
      if (!res.ok) {
        throw new PlauditHttpError(
          res.status,
          errorBody(res.status, res.statusText, text),
          method,
          url,
          res.headers,
        );
      }
      if (text === "") return undefined as T;
      try {
        return JSON.parse(text) as T;
      } catch {
        throw new PlauditResponseError(
          `${method} ${url} answered ${res.status} with a body that is not JSON`,
          res.status,
          text.slice(0, ERROR_TEXT_KEPT),
        );
      }
    } finally {
      if (timer !== undefined) clearTimeout(timer);
      spec.signal?.removeEventListener("abort", onAbort);
    }
  }
}
